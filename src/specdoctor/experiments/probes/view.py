"""The live engine's draft as built, read from the startup pack's ``[probe]`` lines (pure).

``read(lines)`` turns the lines of one server's log into an ``EngineView``: per worker
process, the first ``model-built`` row is the target and the next the draft (the proposer loads
it after the target, with the draft's own ``VllmConfig``); the ``aux-layers`` line is what the
target hands an EAGLE3/DFlash drafter, ``dflash-metadata`` the causality DFlash's attention
metadata carries, ``speculative-config`` the method and k vLLM resolved. Nothing here knows a
model: what is missing stays None, and ``errors`` keeps every probe that reported one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from specdoctor.packs.run import ProbeLine

# Fields of ParallelConfig that shard the KV cache the draft's attention reads (Case B).
CONTEXT_PARALLEL = ("decode_context_parallel_size", "prefill_context_parallel_size")
INTERLEAVE = ("dcp_kv_cache_interleave_size", "cp_kv_cache_interleave_size")
# vLLM's names of attention backends (AttentionBackendEnum / get_name()) → the mask models of
# experiments/masks.
BACKEND_MASKS = {"CPU_ATTN": "cpu", "FLASH_ATTN": "fa2", "FLEX_ATTENTION": "flex",
                 "TRITON_ATTN": "triton"}


@dataclass(frozen=True)
class Layer:
    """One attention layer as constructed."""

    name: str
    window: int | None
    causal: bool | None       # the module's own causality (DFlash), None where it has none
    attn_type: str | None
    head_size: int | None
    num_heads: int | None
    num_kv_heads: int | None
    backend: str | None
    kv_cache_dtype: str | None

    @property
    def mask_model(self) -> str | None:
        return BACKEND_MASKS.get(self.backend or "")


@dataclass(frozen=True)
class Rope:
    """One rotary embedding as constructed (its class names the scaling it applies)."""

    layer: str
    cls: str
    head_size: int | None
    rotary_dim: int | None
    max_position: int | None
    base: float | None
    is_neox_style: bool | None
    scaling: tuple[tuple[str, Any], ...] = ()

    def settings(self) -> dict[str, Any]:
        """What rotates a query: everything but the layer's name."""
        return {"class": self.cls, "base": self.base, "is_neox_style": self.is_neox_style,
                "rotary_dim": self.rotary_dim, "head_size": self.head_size,
                **dict(self.scaling)}


@dataclass(frozen=True)
class BuiltModel:
    model: str
    architectures: tuple[str, ...]
    cls: str
    dtype: str
    parallel: dict[str, Any]
    attention: tuple[Layer, ...]
    ropes: tuple[Rope, ...]
    block_size: int | None = None
    cache_dtype: str | None = None
    use_non_causal: bool | None = None

    def cp(self, key: str) -> int:
        v = self.parallel.get(key)
        return int(v) if isinstance(v, int) else 1

    def distinct_ropes(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for r in self.ropes:
            if r.settings() not in out:
                out.append(r.settings())
        return out


@dataclass(frozen=True)
class EngineView:
    target: BuiltModel | None
    draft: BuiltModel | None
    method: str | None = None
    k: int | None = None
    aux_layers: tuple[int, ...] | None = None
    metadata_causal: bool | None = None      # DFlash: the causality every draft layer gets
    errors: tuple[str, ...] = ()
    lines: int = 0

    @property
    def empty(self) -> bool:
        return self.target is None

    def draft_causal(self, layer: Layer) -> bool | None:
        """The causality a draft layer attends with: DFlash's metadata value (one for all
        layers), else the layer's type (a decoder layer is causal)."""
        if self.metadata_causal is not None:
            return self.metadata_causal
        if layer.attn_type is None:
            return None
        return "encoder" not in layer.attn_type.lower()

    def to_json(self) -> dict[str, Any]:
        def model(m: BuiltModel | None) -> dict[str, Any] | None:
            if m is None:
                return None
            return {"model": m.model, "architectures": list(m.architectures), "class": m.cls,
                    "dtype": m.dtype, "parallel": m.parallel, "block_size": m.block_size,
                    "attention": [vars(x) for x in m.attention[:16]],
                    "layers": len(m.attention), "ropes": m.distinct_ropes()}
        return {"target": model(self.target), "draft": model(self.draft),
                "method": self.method, "k": self.k,
                "aux_layers": None if self.aux_layers is None else list(self.aux_layers),
                "metadata_causal": self.metadata_causal, "errors": list(self.errors),
                "lines": self.lines}


def _int(x: Any) -> int | None:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _layer(d: dict[str, Any]) -> Layer:
    return Layer(str(d.get("name", "")), _int(d.get("window")),
                 d["causal"] if isinstance(d.get("causal"), bool) else None,
                 None if d.get("attn_type") is None else str(d["attn_type"]),
                 _int(d.get("head_size")), _int(d.get("num_heads")),
                 _int(d.get("num_kv_heads")),
                 None if d.get("backend") is None else str(d["backend"]),
                 None if d.get("kv_cache_dtype") is None else str(d["kv_cache_dtype"]))


def _rope(d: dict[str, Any]) -> Rope:
    known = {"layer", "class", "head_size", "rotary_dim", "max_position", "base",
             "is_neox_style"}
    base = d.get("base")
    return Rope(str(d.get("layer", "")), str(d.get("class", "")), _int(d.get("head_size")),
                _int(d.get("rotary_dim")), _int(d.get("max_position")),
                float(base) if isinstance(base, (int, float)) else None,
                d["is_neox_style"] if isinstance(d.get("is_neox_style"), bool) else None,
                tuple(sorted((k, v) for k, v in d.items() if k not in known)))


def built_model(d: dict[str, Any]) -> BuiltModel:
    return BuiltModel(str(d.get("model", "")), tuple(map(str, d.get("architectures") or ())),
                      str(d.get("class", "")), str(d.get("dtype", "")),
                      dict(d.get("parallel") or {}),
                      tuple(_layer(x) for x in d.get("attention") or () if isinstance(x, dict)),
                      tuple(_rope(x) for x in d.get("rope") or () if isinstance(x, dict)),
                      _int(d.get("block_size")),
                      None if d.get("cache_dtype") is None else str(d["cache_dtype"]),
                      d["use_non_causal"] if isinstance(d.get("use_non_causal"), bool)
                      else None)


def read(lines: Iterable[ProbeLine]) -> EngineView:
    """The engine view of one server's probe lines (the first worker that built two models
    decides; a worker that built one is a target without a draft)."""
    lines = list(lines)
    per_pid: dict[Any, list[dict[str, Any]]] = {}
    errors: list[str] = []
    method = k = aux = metadata = None
    for ln in lines:
        d = ln.data
        if "error" in d:
            errors.append(f"{ln.probe}: {str(d['error'])[:300]}")
            continue
        if ln.probe == "model-built" and "index" in d:
            per_pid.setdefault(d.get("pid"), []).append(d)
        elif ln.probe == "aux-layers" and aux is None and isinstance(d.get("layers"), list):
            aux = tuple(int(i) for i in d["layers"] if isinstance(i, int))
        elif ln.probe == "dflash-metadata" and isinstance(d.get("causal"), bool):
            metadata = d["causal"]
        elif ln.probe == "speculative-config" and method is None:
            method = d.get("method") if isinstance(d.get("method"), str) else None
            k = _int(d.get("k"))
    rows = max(per_pid.values(), key=len, default=[])
    rows = sorted(rows, key=lambda r: r.get("index", 0))
    target = built_model(rows[0]) if rows else None
    draft = built_model(rows[1]) if len(rows) > 1 else None
    return EngineView(target, draft, method, k, aux, metadata, tuple(errors), len(lines))
