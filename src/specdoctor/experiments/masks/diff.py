"""Compare backend masks bit by bit over a range of context lengths.

For every ctx in [lo, hi] the n x (ctx+n) masks of all backends are built and
compared cell by cell. Backends whose masks agree everywhere form one group;
for each pair of groups the differing cells are listed (ctx, query position,
key position, who sees it), with the distances q-k they occur at, so "they
differ only on the window's edge diagonal" is read off, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdoctor.errors import InputError
from specdoctor.experiments.masks.backends import Resolved
from specdoctor.experiments.masks.model import MaskSpec, mask_rows

MAX_CELLS_LISTED = 64
# What a diff compares unless told otherwise: q query tokens per step, context lengths A..B.
QUERIES = 8
CTX = (0, 16)
# Sizes refused before anything is built: one mask (q rows x ctx+q keys, a byte per cell per
# backend) and all the masks of one diff (the work: each is built twice when masks differ).
MAX_MASK_CELLS = 1 << 24
MAX_DIFF_CELLS = 1 << 30


def check_size(lo: int, hi: int, n: int) -> None:
    """Refuse a range or query count whose masks cannot be built here, naming the limit."""
    if lo < 0 or hi < lo or n < 1:
        raise InputError(f"ctx {lo}..{hi} with q={n}: need 0 <= A <= B and q >= 1",
                         "e.g. --ctx 0..16 --q 8")
    one = n * (hi + n)
    total = n * ((hi - lo + 1) * n + (lo + hi) * (hi - lo + 1) // 2)
    if one > MAX_MASK_CELLS:
        raise InputError(f"a mask of q={n} at ctx {hi} has {one:,} cells, past the limit of "
                         f"{MAX_MASK_CELLS:,}", "narrow --ctx or --q")
    if total > MAX_DIFF_CELLS:
        raise InputError(f"ctx {lo}..{hi} with q={n} is {total:,} mask cells, past the limit of "
                         f"{MAX_DIFF_CELLS:,}", "narrow the --ctx range")


@dataclass
class Cell:
    ctx: int
    q: int  # absolute query position (ctx + i)
    k: int
    a: bool  # visible in group a's mask
    b: bool


@dataclass
class PairDiff:
    a: list[str]
    b: list[str]
    cells: int = 0
    listed: list[Cell] = field(default_factory=list)
    distances: dict[int, int] = field(default_factory=dict)  # q-k -> differing cells
    ctx_seen: list[int] = field(default_factory=list)  # [first, last] ctx with a difference

    def summary(self, spec: MaskSpec) -> str:
        ds = sorted(self.distances)
        where = ", ".join(f"q-k={d} ({self.distances[d]})" for d in ds[:8])
        if len(ds) > 8:
            where += f", … {len(ds)} distances"
        edge = ""
        if spec.window is not None and {abs(d) for d in ds} <= {spec.window - 1, spec.window}:
            edge = " — only on the window's edge diagonal"
        return (f"{self.cells} cells differ for ctx {self.ctx_seen[0]}..{self.ctx_seen[1]}: "
                f"{where}{edge}")


@dataclass
class MaskDiff:
    spec: MaskSpec
    ctx: tuple[int, int]
    n: int
    models: list[Resolved]
    groups: list[list[str]]
    pairs: list[PairDiff]

    @property
    def identical(self) -> bool:
        return len(self.groups) == 1


def _matrices(models: list[Resolved], spec: MaskSpec, ctx: int, n: int) -> dict[str, Any]:
    try:
        from specdoctor.experiments.masks.model import mask_array

        return {m.impl: mask_array(m.convention, spec, ctx, n) for m in models}
    except ImportError:  # no numpy: the plain-Python reference, slower but the same bits
        return {m.impl: mask_rows(m.convention, spec, ctx, n) for m in models}


def _equal(x: Any, y: Any) -> bool:
    eq = x == y
    return bool(eq.all()) if hasattr(eq, "all") else bool(eq)


def _differences(x: Any, y: Any) -> list[tuple[int, int]]:
    if hasattr(x, "shape"):
        import numpy as np

        return [(int(i), int(k)) for i, k in zip(*np.nonzero(x != y), strict=True)]
    return [(i, k) for i, (rx, ry) in enumerate(zip(x, y, strict=True))
            for k, (bx, by) in enumerate(zip(rx, ry, strict=True)) if bx != by]


def diff_masks(models: list[Resolved], spec: MaskSpec, lo: int = CTX[0], hi: int = CTX[1],
               n: int = QUERIES) -> MaskDiff:
    check_size(lo, hi, n)
    impls = [m.impl for m in models]
    # Union-find over "equal at every ctx": start together, split on the first difference.
    same = {(a, b): True for i, a in enumerate(impls) for b in impls[i + 1:]}
    for ctx in range(lo, hi + 1):
        mats = _matrices(models, spec, ctx, n)
        for a, b in same:
            if same[(a, b)] and not _equal(mats[a], mats[b]):
                same[(a, b)] = False
    groups: list[list[str]] = []
    for impl in impls:
        for g in groups:
            if same.get((g[0], impl), False):
                g.append(impl)
                break
        else:
            groups.append([impl])
    pairs = [PairDiff(ga, gb) for i, ga in enumerate(groups) for gb in groups[i + 1:]]
    if pairs:  # a second pass, only when something differs, to list the cells
        for ctx in range(lo, hi + 1):
            mats = _matrices(models, spec, ctx, n)
            for pair in pairs:
                _collect(pair, mats[pair.a[0]], mats[pair.b[0]], ctx)
    return MaskDiff(spec, (lo, hi), n, models, groups, pairs)


def _collect(pair: PairDiff, x: Any, y: Any, ctx: int) -> None:
    diffs = _differences(x, y)
    if not diffs:
        return
    pair.ctx_seen = [pair.ctx_seen[0] if pair.ctx_seen else ctx, ctx]
    for i, k in diffs:
        q = ctx + i
        pair.cells += 1
        pair.distances[q - k] = pair.distances.get(q - k, 0) + 1
        if len(pair.listed) < MAX_CELLS_LISTED:
            pair.listed.append(Cell(ctx, q, k, bool(x[i][k]), bool(y[i][k])))
