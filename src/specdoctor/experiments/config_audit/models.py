"""Does a drafter fit its target? Two model directories compared by what the method needs.

Pure file reading (``config.json``, tokenizer files, the safetensors header: ``served_files``):
no vLLM, no torch.

- Every drafter: the tokenizer (vocabulary and special tokens) must agree with the target's, or a
  draft→target vocabulary map must exist (EAGLE3's ``d2t``); a drafter without its own tokenizer
  uses the target's.
- Drafters fed the target's hidden states (eagle, eagle3, mtp, dflash): the hidden size must
  fit, the aux layer ids must name layers the target has (and match the drafter's ``fc`` input),
  and the rope must be the target's.
- Independent draft models (draft_model): head dims, layer counts, dtype or max positions may
  differ by design; a rope or attention-window difference within the same model family is a
  *suspect* to test (the counterfactual relaunch decides), never a verdict.

Each ``ConfigCheck`` (one compared setting, not a diagnosis ``Finding``) carries a level:
``ok``, ``info`` (differs by design), ``suspect`` (may cost acceptance: test it), ``problem``
(cannot work as configured).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.served_files import (
    aux_layer_ids, dflash_causal, read_config, rope_view, tensor_shapes, window_of,
)

HIDDEN_FED = ("eagle", "eagle3", "mtp", "dflash")
METHODS = ("draft_model", *HIDDEN_FED)
DEFAULT_METHOD = "draft_model"
LEVELS = ("ok", "info", "suspect", "problem")


@dataclass(frozen=True)
class ConfigCheck:
    """One setting compared between drafter and target, with its level."""

    level: str
    check: str
    detail: str
    target: Any = None
    draft: Any = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ModelAudit:
    method: str
    target_dir: str
    draft_dir: str
    findings: list[ConfigCheck] = field(default_factory=list)

    def worst(self) -> str:
        return max((f.level for f in self.findings), key=LEVELS.index, default="ok")

    def suspects(self) -> list[ConfigCheck]:
        return [f for f in self.findings if f.level in ("suspect", "problem")]

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "target": self.target_dir, "draft": self.draft_dir,
                "worst": self.worst(), "findings": [f.to_json() for f in self.findings]}


def _tokenizer(d: Path) -> tuple[dict[str, int] | None, dict[str, Any]]:
    vocab = None
    tj = d / "tokenizer.json"
    if tj.is_file():
        try:
            model = json.loads(tj.read_text(encoding="utf-8")).get("model") or {}
            vocab = model.get("vocab") if isinstance(model.get("vocab"), dict) else None
        except (OSError, ValueError):
            vocab = None
    special: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        p = d / name
        if p.is_file():
            try:
                raw = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
                v = raw.get(key)
                if isinstance(v, dict):
                    v = v.get("content")
                if v is not None:
                    special.setdefault(key, v)
    return vocab, special


def audit_models(target_dir: Path, draft_dir: Path, method: str = DEFAULT_METHOD) -> ModelAudit:
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}", f"choose one of: {', '.join(METHODS)}")
    t, d = read_config(target_dir), read_config(draft_dir)
    audit = ModelAudit(method, str(target_dir), str(draft_dir))
    add = audit.findings.append
    _tokenizers(target_dir, draft_dir, t, d, method, add)
    _ids(t, d, add)
    if method in HIDDEN_FED:
        _hidden_fed(method, t, d, draft_dir, add)
    else:
        _independent(t, d, add)
    return audit


def _tokenizers(td: Path, dd: Path, t: dict, d: dict, method: str, add: Any) -> None:
    tv, ts = _tokenizer(td)
    dv, ds = _tokenizer(dd)
    shapes = tensor_shapes(dd) if method in HIDDEN_FED else {}
    has_map = "d2t" in shapes or any(k.endswith(".d2t") for k in shapes)
    if dv is None:
        add(ConfigCheck("ok", "tokenizer", "the drafter has no tokenizer of its own: it uses the "
                                        "target's"))
    elif tv is not None and dv != tv:
        level = "info" if has_map else "problem"
        n = sum(1 for k, v in dv.items() if tv.get(k) != v)
        add(ConfigCheck(level, "tokenizer", f"{n} of {len(dv)} draft vocabulary entries differ from "
                    "the target's" + ("; a d2t map translates draft ids" if has_map else
                                      " and no vocabulary map exists"), len(tv), len(dv)))
    else:
        add(ConfigCheck("ok", "tokenizer", "same vocabulary"))
    for key in sorted(set(ts) & set(ds)):
        if ts[key] != ds[key]:
            add(ConfigCheck("problem", f"special token {key}", "the two tokenizers disagree",
                        ts[key], ds[key]))
    tvs, dvs = t.get("vocab_size"), d.get("vocab_size")
    dvocab = d.get("draft_vocab_size") or dvs
    if dvocab and tvs and dvocab != tvs:
        level = "info" if has_map else "problem"
        add(ConfigCheck(level, "vocab_size", "draft vocabulary differs" + (
            " (d2t maps it)" if has_map else ": draft ids would not be target ids"), tvs, dvocab))


def _ids(t: dict, d: dict, add: Any) -> None:
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if key in t and key in d and t[key] != d[key]:
            add(ConfigCheck("suspect", key, "special token ids differ between the configs",
                        t[key], d[key]))


def _hidden_fed(method: str, t: dict, d: dict, dd: Path, add: Any) -> None:
    th = t.get("hidden_size")
    want = d.get("target_hidden_size") or d.get("hidden_size")
    if method == "mtp":
        want = th  # the MTP layers live in the target's own checkpoint
    if th and want and th != want:
        add(ConfigCheck("problem", "hidden_size", "the drafter expects another hidden size", th, want))
    n_layers = int(t.get("num_hidden_layers") or 0)
    ids = aux_layer_ids(method, d)
    if ids is not None:
        bad = [i for i in ids if not 0 <= i <= n_layers]
        if bad:
            add(ConfigCheck("problem", "aux layer ids", f"ids {bad} name no layer of a "
                        f"{n_layers}-layer target (0 = embeddings, i = output of layer i-1)",
                        n_layers, ids))
        elif method == "dflash" and 0 in ids:
            add(ConfigCheck("suspect", "aux layer ids", "a negative DFlash target_layer_id: the "
                        "drafter reads the embeddings as a layer output; check the ids' "
                        "convention (DFlash counts layer outputs, EAGLE3 layer inputs, and vLLM "
                        "adds one to DFlash's)", n_layers, ids))
        else:
            add(ConfigCheck("ok", "aux layer ids", f"within the target's {n_layers} layers",
                        n_layers, ids))
        fc = tensor_shapes(dd).get("fc.weight") or tensor_shapes(dd).get("model.fc.weight")
        if fc and th and len(fc) == 2 and fc[1] % th == 0 and fc[1] // th not in (len(ids),
                                                                             len(ids) + 1):
            add(ConfigCheck("problem", "fc input", f"fc reads {fc[1] // th} hidden states, the "
                        f"config names {len(ids)}", len(ids), fc[1] // th))
    _rope_and_window(t, d, add, same_family=True)
    if method == "dflash":
        causal = dflash_causal(d)
        if any(causal):
            add(ConfigCheck("suspect", "dflash causality", "vLLM resolves these draft layers "
                        "causal; DFlash drafters predict their block with non-causal "
                        "attention unless trained otherwise", None, causal))
        else:
            add(ConfigCheck("ok", "dflash causality", "non-causal in every draft layer", None, causal))


def _independent(t: dict, d: dict, add: Any) -> None:
    same = (t.get("model_type") == d.get("model_type")
            and (t.get("architectures") or [None])[0] == (d.get("architectures") or [None])[0])
    for key in ("num_hidden_layers", "hidden_size", "head_dim", "max_position_embeddings",
                "torch_dtype", "dtype"):
        if key in t and key in d and t[key] != d[key]:
            add(ConfigCheck("info", key, "differs; independent drafters may differ here by design",
                        t[key], d[key]))
    _rope_and_window(t, d, add, same_family=same)


def _rope_and_window(t: dict, d: dict, add: Any, same_family: bool) -> None:
    tr, dr = rope_view(t), rope_view(d)
    level = "suspect" if same_family else "info"
    why = ("a drafter of the same family with another rope predicts from shifted positions: "
           "test it with the target's rope" if same_family else
           "different families: may be by design")
    if tr != dr:
        add(ConfigCheck(level, "rope", why, tr, dr))
    else:
        add(ConfigCheck("ok", "rope", "same rope settings", tr, dr))
    tw, dw = window_of(t), window_of(d)
    if tw != dw:
        add(ConfigCheck(level, "attention window", "the drafter sees another window of context "
                    "than the target" + ("" if same_family else " (different families)"),
                    tw or None, dw or None))
