"""Build one case's inputs in the real call shape, from logical K/V that stay the truth.

The logical K/V of each sequence (L = ctx + n_q tokens) are generated first, rounded to
the case dtype, and kept in fp64 for the reference. The paged cache
(num_blocks, block_size, H_kv, D) is then filled through a shuffled block table; slots
after a sequence's end and blocks nobody owns hold stale data (large random values),
so a kernel that reads past `seqused_k` or through the wrong block is caught.

`validate` checks any set of paged inputs (built here or loaded from a tap dump) and
raises one InputError naming the first problem: shapes, a block table entry outside
the cache, a sequence longer than its blocks, NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specdoctor.errors import InputError
from specdoctor.experiments.kernels.cases import DEFAULT_DEVICE, Case
from specdoctor.experiments.masks.model import Convention, MaskSpec, mask_array

SPARE_BLOCKS = 3  # blocks owned by no sequence, full of stale data
EDGE_GAIN = 3.0  # q = gain * (k_a + k_b): logits ~ gain * sqrt(D) on the two targets


@dataclass
class Paged:
    """One batched attention call: what the kernel gets, plus the truth for the reference."""

    q: Any  # (total_q, H_q, D) in the case dtype
    k_cache: Any  # (num_blocks, block_size, H_kv, D)
    v_cache: Any
    cu_seqlens_q: Any  # int32 (num_seqs + 1)
    seqused_k: Any  # int32 (num_seqs)
    block_table: Any  # int32 (num_seqs, max_blocks); unused entries 0
    scale: float
    causal: bool
    window: int | None
    k_logical: list[Any]  # per sequence (L, H_kv, D), fp64, never read back from the cache
    v_logical: list[Any]

    @property
    def seqs(self) -> list[tuple[int, int]]:
        cu = self.cu_seqlens_q.tolist()
        used = self.seqused_k.tolist()
        return [(used[s] - (cu[s + 1] - cu[s]), cu[s + 1] - cu[s]) for s in range(len(used))]


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def build(case: Case, device: str = DEFAULT_DEVICE) -> Paged:
    import torch

    gen = torch.Generator().manual_seed(case.seed)
    dtype = torch_dtype(case.dtype)
    hk, d, bs = case.heads_kv, case.head_dim, case.block_size
    lens = [ctx + n for ctx, n in case.seqs]
    blocks_per = [(n + bs - 1) // bs for n in lens]
    num_blocks = sum(blocks_per) + SPARE_BLOCKS

    def rounded(*shape: int, scale: float = 1.0) -> Any:
        x = torch.randn(*shape, generator=gen, dtype=torch.float64) * scale
        return x.to(dtype).to(torch.float64)

    k_log = [rounded(n, hk, d) for n in lens]
    v_log = [rounded(n, hk, d) for n in lens]
    # Stale data everywhere first, then each sequence's tokens through its blocks.
    k_cache = rounded(num_blocks, bs, hk, d, scale=4.0)
    v_cache = rounded(num_blocks, bs, hk, d, scale=4.0)
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    table = torch.zeros(len(lens), max(blocks_per), dtype=torch.int32)
    nxt = 0
    for s, n in enumerate(lens):
        mine = perm[nxt: nxt + blocks_per[s]]
        nxt += blocks_per[s]
        if len(mine) > 1 and mine == sorted(mine):
            mine.reverse()  # a table in ascending order would hide a kernel that ignores it
        for j, blk in enumerate(mine):
            table[s, j] = blk
            lo, hi = j * bs, min(n, (j + 1) * bs)
            k_cache[blk, : hi - lo] = k_log[s][lo:hi]
            v_cache[blk, : hi - lo] = v_log[s][lo:hi]
    q = torch.cat([_queries(case, k_log[s], ctx, nq, gen) for s, (ctx, nq) in enumerate(case.seqs)])
    cu = torch.tensor([0, *torch.tensor([n for _, n in case.seqs]).cumsum(0).tolist()], dtype=torch.int32)
    return Paged(
        q=q.to(dtype).to(device), k_cache=k_cache.to(dtype).to(device), v_cache=v_cache.to(dtype).to(device),
        cu_seqlens_q=cu.to(device), seqused_k=torch.tensor(lens, dtype=torch.int32, device=device),
        block_table=table.to(device), scale=d ** -0.5, causal=case.causal, window=case.window,
        k_logical=[k.to(device) for k in k_log], v_logical=[v.to(device) for v in v_log])


def _queries(case: Case, k: Any, ctx: int, n: int, gen: Any) -> Any:
    """(n, H_q, D) fp64 queries; in "edge" data each aims at a visible/hidden key pair."""
    import numpy as np
    import torch

    q = torch.randn(n, case.heads_q, case.head_dim, generator=gen, dtype=torch.float64)
    if case.data == "random":
        return q
    heads = torch.arange(case.heads_q) // (case.heads_q // case.heads_kv)
    # The targets come from the layer's intended mask (bottom-right causal, |q-k| < W);
    # every backend's mask differs from it, if at all, at these boundaries.
    rows = mask_array(Convention(), MaskSpec(case.window, case.causal), ctx, n)
    q = q * 0.1
    for i in range(n):
        row = rows[i]
        edges = np.nonzero(row[:-1] != row[1:])[0].tolist()
        if edges:
            j = edges[(i + ctx) % len(edges)]
            a, b = j, j + 1
        else:  # everything visible: two keys picked by position
            a, b = (i * 7) % len(row), (i * 13 + 1) % len(row)
        q[i] += EDGE_GAIN * (k[a, heads] + k[b, heads])
    return q


def validate(p: Paged, what: str = "inputs") -> None:
    """One clear InputError for the first thing wrong with a set of paged inputs."""
    import torch

    def bad(problem: str, fix: str) -> InputError:
        return InputError(f"{what}: {problem}", fix)

    if p.q.dim() != 3:
        raise bad(f"q has shape {tuple(p.q.shape)}", "q must be (total_q, H_q, D)")
    if p.k_cache.dim() != 4 or p.k_cache.shape != p.v_cache.shape:
        raise bad(f"k_cache {tuple(p.k_cache.shape)} / v_cache {tuple(p.v_cache.shape)}",
                  "both must be (num_blocks, block_size, H_kv, D) with the same shape")
    nb, bs, hk, d = p.k_cache.shape
    tq, hq, dq = p.q.shape
    if dq != d:
        raise bad(f"q head size {dq} != cache head size {d}", "use the same head size")
    if hq % hk:
        raise bad(f"H_q={hq} is not a multiple of H_kv={hk}", "check the head counts (GQA)")
    ns = p.seqused_k.numel()
    if p.cu_seqlens_q.numel() != ns + 1 or p.block_table.dim() != 2 or p.block_table.shape[0] != ns:
        raise bad(f"{ns} sequences in seqused_k, cu_seqlens_q has {p.cu_seqlens_q.numel()} entries, "
                  f"block_table {tuple(p.block_table.shape)}",
                  "need cu_seqlens_q of num_seqs+1 and block_table (num_seqs, max_blocks)")
    cu = p.cu_seqlens_q.tolist()
    if cu[0] != 0 or cu[-1] != tq or any(b < a for a, b in zip(cu, cu[1:])):
        raise bad(f"cu_seqlens_q {cu} does not split {tq} query tokens",
                  "it must start at 0, not decrease, and end at total_q")
    used = p.seqused_k.tolist()
    for s, n in enumerate(used):
        nq = cu[s + 1] - cu[s]
        if n < nq:
            raise bad(f"sequence {s} has {nq} queries but seqused_k={n}",
                      "seqused_k counts the cached keys including the new tokens")
        need = (n + bs - 1) // bs
        if need > p.block_table.shape[1]:
            raise bad(f"sequence {s} needs {need} blocks of {bs}, the block table has "
                      f"{p.block_table.shape[1]} columns", "check block_size and seqused_k")
        row = p.block_table[s, :need]
        if bool(((row < 0) | (row >= nb)).any()):
            raise bad(f"sequence {s}'s block table points outside the cache "
                      f"(entries {row.tolist()}, cache has {nb} blocks)",
                      "the block table and the cache must come from the same step")
    if p.q.is_floating_point() and bool(torch.isnan(p.q.float()).any()):
        where = torch.isnan(p.q.float()).nonzero()[0].tolist()
        raise bad(f"q holds NaN (first at index {where})",
                  "NaN never passes a comparison: find where it came from first")
    for s, n in enumerate(used):  # only the slots a sequence owns: the rest may be stale
        for name, cache in (("k_cache", p.k_cache), ("v_cache", p.v_cache)):
            rows = gather(cache, p.block_table[s], n)
            if bool(torch.isnan(rows.float()).any()):
                pos = int(torch.isnan(rows.float()).nonzero()[0, 0])
                raise bad(f"{name} holds NaN at sequence {s}, key position {pos}",
                          "NaN never passes a comparison: find where it came from first")


def gather(cache: Any, table_row: Any, n: int) -> Any:
    """The first n logical tokens of one sequence, (n, H_kv, D), read through its block table."""
    bs = cache.shape[1]
    need = (n + bs - 1) // bs
    return cache[table_row[:need].long()].reshape(need * bs, *cache.shape[2:])[:n]
