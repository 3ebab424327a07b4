"""Case B in miniature, with real torch.distributed (gloo, 4 CPU ranks).

One decode step of a layer whose KV cache is sharded across 4 ranks the way decode
context parallelism writes it (position t on rank t % 4, so 22 tokens give local lengths
6/6/5/5), with one KV head (like MLA's latent) and 8 query heads, 2 per rank
(tensor parallel). The same weights run twice:

- target: all-gather the queries, attention over the local shard with its log-sum-exp,
  all-gather partials and LSEs, merge, keep this rank's heads;
- draft: its parallel config lost the context-parallel size, so it believes it is alone:
  no all-gather, no merge, the local partial is taken as the output.

Both then go through a row-parallel o_proj whose all-reduce gives every rank the same
hidden state, bit for bit. Each rank taps the attention (q, pages, metadata, partial,
LSE, output) and the hidden state. A cross-rank check on the hidden state passes for
the draft; `taps check` on the taps before the reduction names the fault.

    python -m specdoctor.experiments.taps.case_b OUT_DIR
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError

WORLD = 4
HEADS = 8
HEAD_DIM = 32
HIDDEN = 64
CONTEXT = 22
BLOCK = 4


def paged_attention(q: Any, k_cache: Any, v_cache: Any, table: Any, n: int, scale: float) -> tuple[Any, Any]:
    """Decode attention of q (1, H, D) over the first n tokens of one paged sequence (1 KV head):
    (out (1, H, D), lse (H, 1)), fp32. This is the kernel the taps watch."""
    import torch

    blocks = (n + BLOCK - 1) // BLOCK
    k = k_cache[table[:blocks].long()].reshape(-1, k_cache.shape[-1])[:n]
    v = v_cache[table[:blocks].long()].reshape(-1, v_cache.shape[-1])[:n]
    logits = torch.einsum("qhd,kd->hqk", q, k) * scale
    lse = torch.logsumexp(logits, dim=-1)
    out = torch.einsum("hqk,kd->qhd", torch.softmax(logits, dim=-1), v)
    return out, lse


def merge(partials: list[Any], lses: list[Any]) -> Any:
    """Combine per-shard attention outputs by their log-sum-exp: the exact full softmax."""
    import torch

    lse = torch.stack(lses)  # (R, H, 1)
    weights = torch.softmax(lse, dim=0)  # exp(lse_r - logsumexp_r lse_r)
    return sum(w.transpose(0, 1)[..., None] * p for w, p in zip(weights, partials, strict=True))


def _pages(local_k: Any, local_v: Any, rank: int) -> tuple[Any, Any, Any]:
    import torch

    n = local_k.shape[0]
    blocks = (n + BLOCK - 1) // BLOCK
    num = blocks + 2
    gen = torch.Generator().manual_seed(100 + rank)
    perm = torch.randperm(num, generator=gen)[:blocks]
    k_cache = torch.randn(num, BLOCK, 1, HEAD_DIM, generator=gen)  # stale data around the shard
    v_cache = torch.randn(num, BLOCK, 1, HEAD_DIM, generator=gen)
    for j, b in enumerate(perm.tolist()):
        lo, hi = j * BLOCK, min(n, (j + 1) * BLOCK)
        k_cache[b, : hi - lo, 0] = local_k[lo:hi]
        v_cache[b, : hi - lo, 0] = local_v[lo:hi]
    return k_cache, v_cache, perm.to(torch.int32)


def _layer(role: str, attn_world: int, rank: int, x: Any, wq: Any, wo: Any,
           k_cache: Any, v_cache: Any, table: Any, n_local: int) -> Any:
    import torch
    import torch.distributed as dist

    from specdoctor.packs.tap import tap

    per = HEADS // WORLD
    mine = slice(rank * per, (rank + 1) * per)
    q_local = (x @ wq[:, mine.start * HEAD_DIM: mine.stop * HEAD_DIM]).view(1, per, HEAD_DIM)
    scale = HEAD_DIM ** -0.5
    if attn_world > 1:
        qs = [torch.empty_like(q_local) for _ in range(WORLD)]
        dist.all_gather(qs, q_local)
        q = torch.cat(qs, dim=1)  # every head, over this rank's shard
    else:
        q = q_local  # believes it is alone: its own heads only
    k_flat, v_flat = k_cache[:, :, 0], v_cache[:, :, 0]
    partial, lse = paged_attention(q, k_flat, v_flat, table, n_local, scale)
    if attn_world > 1:
        parts = [torch.empty_like(partial) for _ in range(WORLD)]
        lses = [torch.empty_like(lse) for _ in range(WORLD)]
        dist.all_gather(parts, partial)
        dist.all_gather(lses, lse)
        merged = merge(parts, lses)
        out_mine = merged[:, mine]
    else:
        merged = partial  # no merge: the partial is taken for the whole
        out_mine = merged
    tap("attn", {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_table": table[None],
                 "seqused_k": torch.tensor([n_local], dtype=torch.int32),
                 "cu_seqlens_q": torch.tensor([0, 1], dtype=torch.int32),
                 "partial_out": partial, "lse": lse, "out": merged},
        layer=f"{role}.0", rank=rank, step=0,
        meta={"attn_world_size": attn_world, "kv_world_size": WORLD, "kv_layout": "interleave",
              "causal": True, "scale": scale, "heads": f"{mine.start}..{mine.stop - 1}"})
    # Row-parallel o_proj: each rank multiplies its heads' slice, the all-reduce sums them.
    h = out_mine.reshape(1, -1) @ wo[mine.start * HEAD_DIM: mine.stop * HEAD_DIM]
    dist.all_reduce(h)
    hidden = x + h
    tap("hidden", {"hidden": hidden}, layer=f"{role}.0", rank=rank, step=0)
    return hidden


def _rank_main(rank: int, port: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ["SPECDOCTOR_TAPS"] = out_dir
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        gen = torch.Generator().manual_seed(0)  # the same weights and context on every rank
        x = torch.randn(1, HIDDEN, generator=gen)
        wq = torch.randn(HIDDEN, HEADS * HEAD_DIM, generator=gen) / HIDDEN ** 0.5
        wo = torch.randn(HEADS * HEAD_DIM, HIDDEN, generator=gen) / (HEADS * HEAD_DIM) ** 0.5
        keys = torch.randn(CONTEXT, HEAD_DIM, generator=gen)
        values = torch.randn(CONTEXT, HEAD_DIM, generator=gen)
        # DCP's interleaved layout: position t lives on rank t % WORLD, local slot t // WORLD
        local_k, local_v = keys[rank::WORLD], values[rank::WORLD]
        k_cache, v_cache, table = _pages(local_k, local_v, rank)
        for role, attn_world in (("target", WORLD), ("draft", 1)):
            _layer(role, attn_world, rank, x, wq, wo, k_cache, v_cache, table, local_k.shape[0])
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run(out_dir: Path) -> Path:
    """Run the 4 ranks (spawned processes) and return the tap directory."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} is a file, not a directory",
                         "pass a new or existing directory for the taps")
    import torch.multiprocessing as mp

    from specdoctor.launch import free_port

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {out_dir}: {exc.strerror}", "pass a writable directory") from exc
    mp.spawn(_rank_main, args=(free_port(), str(out_dir)), nprocs=WORLD, join=True)
    return out_dir


if __name__ == "__main__":
    print(run(Path(sys.argv[1] if len(sys.argv) > 1 else "case_b_taps")))
