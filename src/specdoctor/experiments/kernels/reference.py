"""The reference: attention in fp64 over the logical (unpaged) K/V with an explicit bit mask.

Nothing here reads the paged cache or the block table: keys and values are the logical
tensors the case generated, the mask is the mask model's bit matrix for the backend
under test (`reference_mask`), and GQA is a hand-written head broadcast (query head h
reads KV head h // (H_q / H_kv)). fp64 where the device has it, else fp32.
"""

from __future__ import annotations

from typing import Any


def attention(q: Any, k: Any, v: Any, mask: Any, scale: float) -> Any:
    """q (n, H_q, D), k/v (L, H_kv, D), mask (n, L) bool -> (n, H_q, D), all in q's dtype.

    A query that sees no key gets zeros (softmax over nothing is undefined; kernels differ)."""
    import torch

    group = q.shape[1] // k.shape[1]
    heads = torch.arange(q.shape[1], device=q.device) // group  # hand-written GQA broadcast
    kh, vh = k[:, heads], v[:, heads]  # (L, H_q, D)
    logits = torch.einsum("nhd,lhd->hnl", q, kh) * scale
    logits = logits.masked_fill(~mask[None], float("-inf"))
    probs = torch.softmax(logits, dim=-1).nan_to_num(0.0)
    return torch.einsum("hnl,lhd->nhd", probs, vh)


def reference_dtype(device: str, name: str = "float64") -> Any:
    import torch

    return torch.float32 if device == "mps" else getattr(torch, name)


def paged_reference(p: Any, masks: list[Any], device: str, dtype: str = "float64") -> Any:
    """(total_q, H_q, D) reference for a `Paged` call; masks[s] is sequence s's (n, L) bit mask."""
    import torch

    dt = reference_dtype(device, dtype)
    q = p.q.to(dt)
    cu = p.cu_seqlens_q.tolist()
    out = torch.empty_like(q)
    for s in range(len(masks)):
        mask = torch.as_tensor(masks[s], device=q.device)
        out[cu[s]:cu[s + 1]] = attention(q[cu[s]:cu[s + 1]], p.k_logical[s].to(dt),
                                         p.v_logical[s].to(dt), mask, p.scale)
    return out
