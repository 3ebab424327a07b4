"""Dump named tensors to safetensors from inside a running server, behind an environment gate.

    from specdoctor.packs.tap import tap
    tap("attn", {"q": q, "k_cache": k, "v_cache": v, "block_table": bt, "seqused_k": lens,
                 "cu_seqlens_q": cu, "out": out}, layer="draft.0", meta={"causal": True})

Nothing happens unless SPECDOCTOR_TAPS names a directory. Then every call writes
DIR/NAME.LAYER.rRANK.sSTEP.safetensors (tensors copied to CPU, metadata as strings);
RANK comes from torch.distributed when it is initialised (else 0), STEP counts calls
per (name, layer) in this process. Bounded per process: SPECDOCTOR_TAPS_MAX records
(default 64) and SPECDOCTOR_TAPS_MAX_BYTES (default 256 MiB); past either, calls are
dropped and one line says so. SPECDOCTOR_TAPS_LAYERS (comma-separated) keeps only
those layers. Probe rule: a tap never raises and never changes a tensor; a failure is
logged once and the server goes on.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("specdoctor.taps")

ENV_DIR = "SPECDOCTOR_TAPS"
ENV_MAX = "SPECDOCTOR_TAPS_MAX"
ENV_MAX_BYTES = "SPECDOCTOR_TAPS_MAX_BYTES"
ENV_LAYERS = "SPECDOCTOR_TAPS_LAYERS"

_lock = threading.Lock()
_state: dict[str, Any] = {"records": 0, "bytes": 0, "steps": {}, "warned": set()}


def enabled() -> bool:
    return bool(os.environ.get(ENV_DIR))


def _warn_once(key: str, msg: str) -> None:
    if key not in _state["warned"]:
        _state["warned"].add(key)
        log.warning("[taps] %s", msg)


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    except Exception:
        return 0


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def tap(name: str, tensors: dict[str, Any], *, layer: str | int = "0", rank: int | None = None,
        step: int | None = None, meta: dict[str, Any] | None = None) -> Path | None:
    """Write one record; returns its path, or None when taps are off, full or failing."""
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return None
    try:
        layers = os.environ.get(ENV_LAYERS)
        if layers and str(layer) not in {x.strip() for x in layers.split(",")}:
            return None
        return _write(Path(directory), name, tensors, str(layer), rank, step, meta or {})
    except Exception as exc:  # a probe must never become a new fault
        _warn_once(f"fail:{name}", f"tap {name!r} failed and is off for this call: {type(exc).__name__}: {exc}")
        return None


def _write(directory: Path, name: str, tensors: dict[str, Any], layer: str, rank: int | None,
           step: int | None, meta: dict[str, Any]) -> Path | None:
    import torch
    from safetensors.torch import save_file

    max_records = int(os.environ.get(ENV_MAX, "64"))
    max_bytes = int(os.environ.get(ENV_MAX_BYTES, str(256 << 20)))
    cpu = {k: (v.detach().to("cpu").contiguous().clone() if isinstance(v, torch.Tensor)
               else torch.tensor(v)) for k, v in tensors.items()}
    size = sum(t.numel() * t.element_size() for t in cpu.values())
    rank = _rank() if rank is None else rank
    with _lock:
        if _state["records"] >= max_records or _state["bytes"] + size > max_bytes:
            _warn_once("full", f"limit reached ({_state['records']} records, {_state['bytes']} bytes): "
                               f"further taps dropped; raise {ENV_MAX} / {ENV_MAX_BYTES}")
            return None
        key = (name, layer)
        if step is None:
            step = _state["steps"].get(key, 0)
        _state["steps"][key] = step + 1
        _state["records"] += 1
        _state["bytes"] += size
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_safe(name)}.{_safe(layer)}.r{rank}.s{step}.safetensors"
    header = {"name": name, "layer": layer, "rank": str(rank), "step": str(step),
              "meta": json.dumps(meta, default=str)}
    save_file(cpu, str(path), metadata=header)
    return path


def reset() -> None:
    """Forget counts (tests, or a server that wants a fresh budget per request)."""
    with _lock:
        _state.update(records=0, bytes=0, steps={}, warned=set())
