"""Loading target and drafter for the oracle: the checks that come first, then a cached forward.

Before anything is loaded:

- ``check_vocab``: token-level acceptance only means something when draft token i IS target
  token i. Different vocabularies (size, or the same size with other strings behind the ids)
  are refused with the mismatch named, unless a draft→target id map is given.
- ``check_fits``: the weights' size (read from the safetensors headers, not by loading them) in
  the oracle's dtype, against the device's free memory. Too large: say so and stop.

``CachedLM`` wraps a Hugging Face causal LM with one KV cache that follows a token sequence as
it grows and rewinds (drafts that were rejected), so each step feeds only the new tokens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.errors import InputError
from specdoctor.textfile import MAX_CONFIG, read_limited
from specdoctor.served_files import read_config, safetensors_header

log = logging.getLogger(__name__)

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Activations, KV cache and the framework's own buffers on top of the weights.
MEMORY_HEADROOM = 1.3
MEMORY_FIXED_BYTES = 512 * 2**20


# -- checks before loading ---------------------------------------------------------------------

def param_count(model_dir: Path) -> int:
    """Number of parameters, from the safetensors headers (no tensor is read)."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise InputError(f"{model_dir} has no *.safetensors weights",
                         "the oracle loads safetensors checkpoints; convert with save_pretrained")
    total = 0
    for f in files:
        for name, meta in safetensors_header(f).items():
            if name != "__metadata__":
                total += int(np.prod(meta["shape"], dtype=np.int64))
    return total


def available_bytes(device: str) -> int:
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def check_fits(model_dirs: Sequence[Path], device: str, dtype: str) -> int:
    """Refuse before loading when the models cannot fit; returns the estimated bytes."""
    per = {d: param_count(d) * DTYPE_BYTES[dtype] for d in model_dirs}
    need = int(sum(per.values()) * MEMORY_HEADROOM + MEMORY_FIXED_BYTES)
    have = available_bytes(device)
    if need > have:
        sizes = ", ".join(f"{d.name} {b / 2**30:.2f} GiB" for d, b in per.items())
        raise InputError(
            f"the models do not fit on {device}: weights in {dtype} ({sizes}) need about "
            f"{need / 2**30:.1f} GiB with working memory, {have / 2**30:.1f} GiB is free",
            "run on a larger device (--device cuda), use --dtype bfloat16, or free memory",
        )
    return need


@dataclass(frozen=True)
class VocabMap:
    """Draft id → target id (``-1``: no target token), as EAGLE3's d2t but as absolute ids."""

    draft_to_target: tuple[int, ...]

    @classmethod
    def load(cls, path: Path) -> VocabMap:
        try:
            data = json.loads(read_limited(path, "vocabulary map", MAX_CONFIG, "--vocab-map"))
            ids = data["draft_to_target"] if isinstance(data, dict) else data
            return cls(tuple(int(x) for x in ids))
        except (OSError, ValueError, KeyError, TypeError, RecursionError, OverflowError) as exc:
            raise InputError(f"cannot read the vocabulary map {path}: {exc}",
                             'write JSON {"draft_to_target": [target id or -1, ...]}') from exc

    def target_to_draft(self, target_vocab: int) -> np.ndarray:
        inv = np.full(target_vocab, -1, dtype=np.int64)
        for d, t in enumerate(self.draft_to_target):
            if t >= 0:
                if inv[t] >= 0:
                    raise InputError(f"the vocabulary map sends draft ids {inv[t]} and {d} to "
                                     f"target id {t}", "a map must be one-to-one")
                inv[t] = d
        return inv


def check_vocab(target_dir: Path, draft_dir: Path, vocab_map: VocabMap | None) -> None:
    """Refuse a drafter whose token ids do not mean the target's tokens (unless mapped)."""
    tcfg, dcfg = read_config(target_dir), read_config(draft_dir)
    tv, dv = tcfg.get("vocab_size"), dcfg.get("vocab_size")
    tvocab, dvocab = _vocab(target_dir), _vocab(draft_dir)
    if vocab_map is not None:
        if len(vocab_map.draft_to_target) != dv:
            raise InputError(f"the vocabulary map has {len(vocab_map.draft_to_target)} entries, "
                             f"the drafter's vocabulary {dv}", "one entry per draft id")
        return
    problems = []
    if tv != dv:
        problems.append(f"vocab_size {tv} (target) vs {dv} (draft)")
    if tvocab is not None and dvocab is not None and tvocab != dvocab:
        differ = [s for s in tvocab.keys() | dvocab.keys() if tvocab.get(s) != dvocab.get(s)]
        examples = ", ".join(f"{s!r}: {tvocab.get(s)} vs {dvocab.get(s)}"
                             for s in sorted(differ)[:3])
        problems.append(f"tokenizers differ on {len(differ)} token strings (e.g. {examples})")
    if problems:
        raise InputError(
            f"target {target_dir.name} and draft {draft_dir.name} do not share a vocabulary: "
            + "; ".join(problems)
            + " — token-level acceptance is undefined between them",
            "use a drafter trained with the target's tokenizer, or pass --vocab-map FILE "
            '({"draft_to_target": [...]}) if its ids map one-to-one onto the target\'s',
        )


def _vocab(model_dir: Path) -> dict[str, int] | None:
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        model = json.loads(path.read_text())["model"]
        vocab = dict(model["vocab"])
    except (ValueError, KeyError, TypeError):
        return None
    for tok in json.loads(path.read_text()).get("added_tokens", []):
        vocab[tok["content"]] = tok["id"]
    return vocab


# -- loading and forward passes ----------------------------------------------------------------

def pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(model_dir: Path, device: str, dtype: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    check_hf_config(model_dir)
    # Eager attention: the plainest math, the reference the engine's kernels should match.
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=getattr(torch, dtype), attn_implementation="eager")
    except Exception as exc:  # noqa: BLE001 - transformers' own error names what is wrong
        raise InputError(f"transformers cannot load the model in {model_dir}: "
                         f"{type(exc).__name__}: {_first_line(exc)}",
                         "check its config.json and weights (they load with "
                         "AutoModelForCausalLM.from_pretrained)") from exc
    return model.to(device).eval()


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    if not any((model_dir / f).is_file() for f in TOKENIZER_FILES):
        raise InputError(f"{model_dir} has no tokenizer ({', '.join(TOKENIZER_FILES)})",
                         "pass --tokenizer DIR, the directory the server's --tokenizer names")
    if (model_dir / "config.json").is_file():
        check_hf_config(model_dir)  # AutoTokenizer reads it too: name it as the culprit
    try:
        return AutoTokenizer.from_pretrained(str(model_dir))
    except Exception as exc:  # noqa: BLE001 - transformers' own error names what is wrong
        raise InputError(f"transformers cannot load the tokenizer in {model_dir}: "
                         f"{type(exc).__name__}: {_first_line(exc)}",
                         "pass --tokenizer DIR, the directory the server's --tokenizer names"
                         ) from exc


def check_hf_config(model_dir: Path) -> None:
    """Refuse a config.json that transformers cannot read, naming its own complaint."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(str(model_dir))
    except Exception as exc:  # noqa: BLE001 - transformers' own error names the field
        raise InputError(f"transformers cannot read {model_dir / 'config.json'}: "
                         f"{type(exc).__name__}: {_first_line(exc)}",
                         "fix that field of config.json (rope_scaling / rope_parameters, "
                         "model_type, …)") from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


class CachedLM:
    """One model, one KV cache, one token sequence that grows and rewinds.

    ``logits(ids, last)`` returns the float32 logits predicting the token after each of the last
    ``last`` positions of ``ids``; the cache keeps whatever prefix ``ids`` shares with the
    previous call, so a step only pays for its new tokens.
    """

    def __init__(self, model: Any, device: str) -> None:
        self.model = model
        self.device = device
        self.ids: list[int] = []
        self.cache: Any = None
        self.forwards = 0
        self.tokens_fed = 0

    def reset(self) -> None:
        self.ids, self.cache = [], None

    def logits(self, ids: Sequence[int], last: int = 1) -> np.ndarray:
        import torch

        ids = list(ids)
        keep = min(_common_prefix(self.ids, ids), len(ids) - last)
        if keep <= 0 or self.cache is None:
            self.cache, keep = None, 0
        elif keep < len(self.ids):
            self.cache.crop(keep - len(self.ids))  # a negative count removes that many tokens
        new = ids[keep:]
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([new], device=self.device),
                             past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        self.ids = ids
        self.forwards += 1
        self.tokens_fed += len(new)
        return out.logits[0, -last:].float().cpu().numpy()

    @contextmanager
    def shifted(self, ids: Sequence[int], offset: int) -> Iterator[Callable[[int], np.ndarray]]:
        """A ``feed(token)`` that appends one token after ``ids`` as a drafting engine appends
        its drafts, at a rotary position ``offset`` away from its slot (the cache slot and the
        causal mask stay where they are), and returns the logits after it. ``ids`` is cached as
        usual; what ``feed`` wrote is cropped on leaving, so later calls see ``ids``. Raises
        ``NotImplementedError`` for a model without a rotary embedding module to shift
        (``model.model.rotary_emb``)."""
        import torch

        rot = getattr(getattr(self.model, "model", None), "rotary_emb", None)
        if rot is None:
            raise NotImplementedError("no rotary embedding module to shift")
        if self.cache is None or self.ids != list(ids):
            self.logits(ids, 1)
        fed = 0

        def feed(token: int) -> np.ndarray:
            nonlocal fed
            out = self.model(input_ids=torch.tensor([[int(token)]], device=self.device),
                             past_key_values=self.cache, use_cache=True)
            self.cache = out.past_key_values
            fed += 1
            self.forwards += 1
            self.tokens_fed += 1
            return out.logits[0, -1].float().cpu().numpy()

        plain = type(rot).forward
        rot.forward = lambda x, position_ids, *a, **kw: plain(rot, x, position_ids + offset,
                                                              *a, **kw)
        try:
            with torch.inference_mode():
                yield feed
        finally:
            del rot.forward
            if fed:
                self.cache.crop(-fed)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
