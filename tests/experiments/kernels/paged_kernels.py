"""Three small paged-attention kernels written from scratch in torch, as a user brings them to
``specdoctor kernels check --impl paged_kernels:NAME``: they share nothing with specdoctor's own
adapters (no gather, no mask model, no SDPA).

- ``bottom_right``: correct. Causal bottom-right (query ``ctx+i`` sees keys up to ``ctx+i``),
  window as vLLM's flash_attn backend passes it (``mask_convention = "fa2"``: ``(left, right)``,
  inclusive, ``(-1, -1)`` for none). ``bottom_right_w`` is the same kernel taking the model's
  window W (no declaration).
- ``top_left``: the causal mask aligned top-left (query ``i`` of a step sees keys ``0..i``,
  SDPA's ``is_causal``), otherwise correct.
- ``planted(bug)``: the correct kernel with one bug planted: ``window-wide`` (the window one key
  wider), ``no-block-table`` (pages read in order 0, 1, 2, ... ignoring the block table),
  ``gqa`` (query head h reads KV head h % H_kv instead of h // (H_q / H_kv)), ``chunk-positions``
  (every query of a chunked prefill placed at the last position, as a decode-only kernel does),
  ``stale-key`` (one key past ``seqused_k`` read: the stale slot after the sequence's end).
"""

from __future__ import annotations

from typing import Any

import torch

BUGS = ("window-wide", "no-block-table", "gqa", "chunk-positions", "stale-key")


def _keys(cache: Any, row: Any, n: int, ignore_table: bool) -> Any:
    """The first n tokens of one sequence from its pages, (n, H_kv, D)."""
    bs = cache.shape[1]
    blocks = -(-n // bs)
    ids = list(range(blocks)) if ignore_table else [int(b) for b in row[:blocks]]
    ids += [0] * (blocks - len(ids))  # past the table's width: block 0 (stale for this sequence)
    return torch.cat([cache[b] for b in ids])[:n]


def _kernel(q: Any, k_cache: Any, v_cache: Any, cu_seqlens_q: Any, seqused_k: Any,
            block_table: Any, scale: float, causal: bool, left: int, right: int,
            align: str = "bottom-right", bug: str | None = None) -> Any:
    """(left, right): keys with q - left <= k <= q + right are in the window; -1: unbounded."""
    out = torch.zeros_like(q)
    hq, hk = q.shape[1], k_cache.shape[2]
    kv_head = [h % hk if bug == "gqa" else h // (hq // hk) for h in range(hq)]
    if bug == "window-wide" and left >= 0:
        left, right = left + 1, (right + 1 if right > 0 else right)
    for s in range(seqused_k.numel()):
        a, b = int(cu_seqlens_q[s]), int(cu_seqlens_q[s + 1])
        n_k, n_q = int(seqused_k[s]), b - a
        read = n_k + 1 if bug == "stale-key" else n_k
        k = _keys(k_cache, block_table[s], read, bug == "no-block-table").to(torch.float32)
        v = _keys(v_cache, block_table[s], read, bug == "no-block-table").to(torch.float32)
        qpos = torch.arange(n_q) + n_k - n_q
        if bug == "chunk-positions":
            qpos = torch.full((n_q,), n_k - 1)
        kpos = torch.arange(read)
        ok = torch.ones(n_q, read, dtype=torch.bool)
        if causal:  # top-left: query i of the step sees keys 0..i, whatever is cached
            limit = qpos - (n_k - n_q) if align == "top-left" else qpos
            ok &= kpos[None, :] <= limit[:, None]
        if left >= 0:
            ok &= kpos[None, :] >= qpos[:, None] - left
        if right >= 0 and not causal:
            ok &= kpos[None, :] <= qpos[:, None] + right
        for h in range(hq):
            logits = (q[a:b, h].to(torch.float32) @ k[:, kv_head[h]].T) * scale
            logits = logits.masked_fill(~ok, float("-inf"))
            p = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # a row that sees nothing: zeros
            out[a:b, h] = (p @ v[:, kv_head[h]]).to(q.dtype)
    return out


def bottom_right(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
                 block_table: Any, scale: float, causal: bool, window: tuple[int, int]) -> Any:
    return _kernel(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, scale, causal,
                   *window)


bottom_right.mask_convention = "fa2"  # type: ignore[attr-defined]


def _fa2(window: int | None, causal: bool) -> tuple[int, int]:
    return (-1, -1) if window is None else (window - 1, 0 if causal else window - 1)


def bottom_right_w(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
                   block_table: Any, scale: float, causal: bool, window: int | None) -> Any:
    return _kernel(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, scale, causal,
                   *_fa2(window, causal))


def top_left(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
             block_table: Any, scale: float, causal: bool, window: int | None) -> Any:
    return _kernel(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, scale, causal,
                   *_fa2(window, causal), align="top-left")


def planted(bug: str) -> Any:
    """The correct kernel (fa2 window form) with ``bug`` in it."""
    if bug not in BUGS:
        raise ValueError(bug)

    def fn(q: Any, k_cache: Any, v_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
           block_table: Any, scale: float, causal: bool, window: tuple[int, int]) -> Any:
        return _kernel(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, scale, causal,
                       *window, bug=bug)

    fn.mask_convention = "fa2"  # type: ignore[attr-defined]
    return fn


window_wide, no_block_table, gqa, chunk_positions, stale_key = (planted(b) for b in BUGS)
