"""Readers of the served files: what a model directory (the target's, the drafter's) states,
read plainly from ``config.json`` and the safetensors headers — no vLLM, no torch, nothing of an
experiment. The config audit, the probes, the masks, the engine's own config functions, the
counterfactuals and the oracle all read the files through here, so they read them alike.

- ``read_config``: the directory's ``config.json``. One failure rule: a missing file, one that
  cannot be read, is not JSON or is not a JSON object is refused as bad input (``InputError``,
  exit 2) naming the file and the fix; callers that can go on without it catch that.
- ``safetensors_header``: one weights file's tensor table, refused as bad input when it is not
  one; ``tensor_shapes``: every file's shapes, skipping a file that has no readable table.
- ``fc_reads``: how many target hidden states the drafter's ``fc`` reads.
- ``rope_view``, ``window_of``, ``dflash_causal``, ``stated_masks``, ``aux_layer_ids``: the
  rotary embedding, the attention window, DFlash's causality, each draft layer's mask and the
  target layers a drafter reads, as the config states them (pure).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError

# Where configs spell the rotary embedding; later containers win, as in transformers' loading.
ROPE_CONTAINERS = ("rope_scaling", "rope_parameters")
ROPE_TOP_LEVEL = ("rope_theta", "partial_rotary_factor")
# Rope settings that mean "no change" (absent and these values compare equal).
ROPE_NEUTRAL = {"rope_type": "default", "partial_rotary_factor": 1.0}
_UNSET = object()
# The safetensors format caps its JSON header at 100 MB.
MAX_HEADER_BYTES = 100_000_000


# -- the files ------------------------------------------------------------------------------------

def read_config(d: Path) -> dict[str, Any]:
    """``d/config.json`` as a dict; bad input (exit 2) when missing, unreadable, not JSON or not
    a JSON object."""
    p = d / "config.json"
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no config.json in {d}", "pass a model directory (the one you "
                         "give vLLM's --model or the speculative config's model)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {p}: {exc}",
                         "check the file is the model's JSON config") from exc
    if not isinstance(cfg, dict):
        raise InputError(f"{p} is not a JSON object", "check the model directory")
    return cfg


def safetensors_header(path: Path) -> dict[str, Any]:
    """A safetensors file's header (tensor names, dtypes, shapes), checked before it is read:
    a length past the file or the format's cap, or a header that is no tensor table, is
    refused naming the file."""
    bad = InputError(f"{path} is not a safetensors file", "re-save the weights with "
                     "save_pretrained(..., safe_serialization=True)")
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise bad
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, MAX_HEADER_BYTES):
                raise InputError(f"{path}: its header claims {n:,} bytes in a file of {size:,}",
                                 bad.fix)
            header = json.loads(fh.read(n))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}",
                         "check the model directory") from exc
    except ValueError as exc:  # not UTF-8, not JSON
        raise bad from exc
    ok = isinstance(header, dict) and all(
        k == "__metadata__" or (isinstance(v, dict) and isinstance(v.get("shape"), list)
                                and all(isinstance(d, int) and d >= 0 for d in v["shape"]))
        for k, v in header.items())
    if not ok:
        raise bad
    return header


def tensor_shapes(d: Path) -> dict[str, list[int]]:
    """Tensor name → shape from every ``*.safetensors`` header (no tensor data is read); a file
    whose header is refused (``safetensors_header``) adds nothing."""
    out: dict[str, list[int]] = {}
    for f in sorted(d.glob("*.safetensors")):
        try:
            header = safetensors_header(f)
        except InputError:
            continue
        for k, v in header.items():
            if isinstance(v, dict) and "shape" in v:
                out[k] = list(v["shape"])
    return out


def fc_reads(draft_dir: Path, target: dict[str, Any]) -> int | None:
    """How many target hidden states the drafter's ``fc`` reads (its input width over the
    target's hidden size), from the safetensors header; None when it has no fc."""
    shapes = tensor_shapes(draft_dir)
    fc = shapes.get("fc.weight") or shapes.get("model.fc.weight")
    hidden = target.get("hidden_size")
    if not fc or len(fc) != 2 or not isinstance(hidden, int) or fc[1] % hidden:
        return None
    return fc[1] // hidden


# -- what a config states (pure) ------------------------------------------------------------------

def rope_view(cfg: dict[str, Any]) -> dict[str, Any]:
    """The rotary embedding's effective settings, whatever the spelling (``rope_parameters``,
    ``rope_scaling``, top-level ``rope_theta``/``partial_rotary_factor``), neutral values left
    out, so two configs that rotate alike compare equal (pure). The one reading of a config's
    rope for comparing two configs (the audit, the counterfactuals); the oracle computes
    frequencies from the config itself (``oracle.heads.ops.rope_from_config``, transformers'
    own initialisers), which is another job."""
    view: dict[str, Any] = {}
    for c in ROPE_CONTAINERS:
        if isinstance(cfg.get(c), dict):
            view.update(cfg[c])
    for k in ROPE_TOP_LEVEL:
        if k in cfg and cfg[k] is not None:
            view.setdefault(k, cfg[k])
    if "type" in view:
        view.setdefault("rope_type", view["type"])
        del view["type"]
    return {k: v for k, v in view.items() if ROPE_NEUTRAL.get(k, _UNSET) != v}


def window_of(cfg: dict[str, Any]) -> dict[str, Any]:
    """Every setting that can give a layer a sliding window."""
    dc = cfg.get("dflash_config") or {}
    w = {"sliding_window": cfg.get("sliding_window") if cfg.get("use_sliding_window", True)
         else None,
         "swa": dc.get("swa_window_size") if dc.get("use_swa") else None,
         "sliding_layers": sum(1 for t in cfg.get("layer_types") or []
                               if t == "sliding_attention")}
    return {k: v for k, v in w.items() if v}


def dflash_causal(cfg: dict[str, Any]) -> list[bool]:
    """Per layer, the causality vLLM 0.32 resolves (qwen3_dflash._dflash_layer_causal): top-level
    ``is_causal``, else ``dflash_config.causal``, else sliding layers causal, else non-causal."""
    n = int(cfg.get("num_hidden_layers") or 0)
    dc = cfg.get("dflash_config") or {}
    types = cfg.get("layer_types") or []
    out = []
    for i in range(n):
        if cfg.get("is_causal") is not None:
            out.append(bool(cfg["is_causal"]))
        elif dc.get("causal") is not None:
            out.append(bool(dc["causal"]))
        else:
            out.append(i < len(types) and types[i] == "sliding_attention")
    return out


def stated_masks(cfg: dict[str, Any], method: str | None, n: int) -> list[tuple[int | None, bool]]:
    """Per draft layer, the (window, causal) the drafter's config states, read plainly: DFlash's
    causality by vLLM's documented precedence (``is_causal``, ``dflash_config.causal``, sliding
    layers), its window from ``use_swa``/``layer_types`` with ``swa_window_size`` (or
    ``sliding_window``); any other drafter causal, with ``sliding_window`` unless
    ``use_sliding_window`` is false or ``layer_types`` says the layer is full."""
    types = list(cfg.get("layer_types") or [])
    if method == "dflash":
        dc = cfg.get("dflash_config") or {}
        causal = dflash_causal(cfg) or [False] * n
        w = dc.get("swa_window_size", cfg.get("sliding_window"))
        any_sliding = "sliding_attention" in types
        out = []
        for i in range(n):
            sliding = (dc.get("use_swa", False) if not types or not any_sliding
                       else i < len(types) and types[i] == "sliding_attention")
            out.append((w if sliding else None, causal[i] if i < len(causal) else False))
        return out
    w = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) is not False else None
    return [(w if not types or (i < len(types) and types[i] == "sliding_attention") else None,
             True) for i in range(n)]


def aux_layer_ids(method: str, cfg: dict[str, Any]) -> list[int] | None:
    """Target layers the drafter reads, in vLLM's convention (0 = embeddings, i = output of
    layer i-1): EAGLE3's ids as written; DFlash's ``target_layer_ids`` plus one."""
    if method == "dflash":
        ids = (cfg.get("dflash_config") or {}).get("target_layer_ids")
        return [int(i) + 1 for i in ids] if ids is not None else None
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or (
        cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return [int(i) for i in ids] if ids else None
