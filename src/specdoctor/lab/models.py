"""Tiny models for the lab, built offline and deterministically (no hub, no download).

The tokenizer is a byte-level BPE trained on a fixed set of the Python standard library's own
source files; the target is a 2-layer Llama with random weights from a fixed seed. Both are
cached under ``$SPECDOCTOR_MODELS/<name>-<fingerprint>``: the fingerprint covers every
input (recipe version, seed, shapes, the corpus files' bytes), so a changed recipe builds anew
and an unchanged one is reused.

Run directly to build: ``python -m specdoctor.lab.models``.
"""

from __future__ import annotations

import hashlib
import json
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

from specdoctor.errors import LabError
from specdoctor.lab.atomic import build_dir
from specdoctor.paths import models_dir

RECIPE_VERSION = 1
# Corpus: these stdlib modules exist on every CPython 3.11+ and hold ~1 MB of varied code.
CORPUS_MODULES = (
    "argparse.py", "ast.py", "collections/__init__.py", "dataclasses.py", "difflib.py",
    "email/message.py", "functools.py", "inspect.py", "json/decoder.py", "logging/__init__.py",
    "pathlib.py", "pickle.py", "random.py", "shutil.py", "statistics.py", "subprocess.py",
    "tarfile.py", "textwrap.py", "threading.py", "typing.py", "unittest/case.py", "zipfile.py",
)


@dataclass(frozen=True)
class TinyLlamaSpec:
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048
    seed: int = 0


def corpus_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [root / m for m in CORPUS_MODULES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise LabError(
            f"standard-library source files missing: {', '.join(missing[:3])}",
            "the lab tokenizer trains on the stdlib's .py sources; use a Python with its source",
        )
    return files


def fingerprint(spec: TinyLlamaSpec) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"recipe": RECIPE_VERSION, **asdict(spec)}, sort_keys=True).encode())
    for f in corpus_files():
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def target_model(spec: TinyLlamaSpec | None = None) -> Path:
    """Directory of the lab's target model (config, weights, tokenizer), building it once."""
    spec = spec or TinyLlamaSpec()
    out = models_dir() / f"tiny-llama-{fingerprint(spec)}"
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        return out

    def fill(tmp: Path) -> None:
        _build_tokenizer(tmp, spec.vocab_size)
        _build_llama(tmp, spec)
        (tmp / "specdoctor-recipe.json").write_text(
            json.dumps({"recipe": RECIPE_VERSION, **asdict(spec)}, indent=2) + "\n"
        )

    build_dir(out, fill)
    return out


def _build_tokenizer(out: Path, vocab_size: int) -> None:
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import PreTrainedTokenizerFast
    except ImportError as exc:
        raise LabError(f"cannot build the lab tokenizer: {exc}", "install the lab: bash scripts/install.sh lab") from exc
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|bos|>", "<|eos|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([str(f) for f in corpus_files()], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>"
    )
    fast.save_pretrained(str(out))


def _build_llama(out: Path, spec: TinyLlamaSpec) -> None:
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:
        raise LabError(f"cannot build the lab model: {exc}", "install the lab: bash scripts/install.sh lab") from exc
    torch.manual_seed(spec.seed)
    config = LlamaConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(str(out), safe_serialization=True)


if __name__ == "__main__":
    print(target_model())
