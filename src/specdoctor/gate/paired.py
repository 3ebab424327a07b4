"""The paired test of the gate: baseline and candidate sent the same prompts, so compare them
prompt by prompt.

Each request of a bench cell is identified by a ``RequestKey``: the slot of its conversation
in the cell, a digest of the conversation's text, and its seed (``None`` when the sampling is
greedy: the seed changes nothing there). Requests that are the same computation (greedy: the
same prompt; sampled: the same prompt slot) form one *unit*; the baseline's and the
candidate's units with the same key form a pair. A prompt set of 8 prompts sent 16 times
greedily gives 8 units, not 16: the two requests of one prompt are the same stream.

The test, per figure of a cell: the statistic is the cell's figure as the gate reports it
(mean acceptance length, or accepted at position i per draft: ratios of counts summed over the
units), candidate minus baseline. Its null distribution comes from swapping the baseline's and
the candidate's counts within pairs (a sign-flip permutation test over the pairs): every one of
the 2^n swap patterns when n ≤ ``EXACT_UNITS``, else ``RESAMPLES`` random ones (the observed
pattern counted in). The two-sided p-value is the share of patterns whose difference is at
least as far from zero as the observed one.

Why this test, and not a paired t or a paired bootstrap. When the candidate is the same server,
a prompt's two measurements are exchangeable: the same prompt, streams drawn from the same
distribution (with the baseline's seeds, the same stream). Swapping them is then exactly
as likely as not, so the permutation distribution is the null distribution itself, with no
normal approximation and no large-sample argument: the false-alarm rate is at most alpha by
construction, whatever the shape of the per-prompt differences. A paired t leans on normality
of the per-prompt differences, which 8 to 16 prompts of skewed acceptance counts do not give;
a paired bootstrap over 16 prompts gives intervals that are too narrow (the project's own
coverage simulation finds 90–95% where 95% is asked, benchmarks/results/
interval_coverage.txt). The price of exactness is granularity: with n pairs the smallest
two-sided p is 2 / 2^n (8 pairs: 0.0078), so a gate whose Holm level is below that cannot call
a drop in such a cell; the gate says so in its sensitivity lines.

Where the prompts are not shared (a baseline file without request keys, a cell whose requests
failed on one side, too few pairs), the gate falls back to its unpaired test (``compare.
mover_p``) and says which one it used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile

# Exact enumeration up to this many pairs (2^16 = 65,536 swap patterns), random patterns above.
EXACT_UNITS = 16
RESAMPLES = 20_000
# The fewest pairs for a paired test: below 6, no swap pattern can give p below 2 / 2^5 = 0.0625.
MIN_PAIRS = 6
# Drops tried when measuring the smallest one a cell would catch (relative to the figure).
DROP_GRID = tuple(x / 100 for x in (0.5, 1, 1.5, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 25, 30,
                                    40, 50, 60, 70, 80, 90, 100))


@dataclass(frozen=True)
class RequestKey:
    """Which prompt and seed one request had: ``slot``, its conversation's position in the
    cell; ``prompt``, the first 16 hex digits of the conversation's sha256; ``seed``, the
    request's seed, or ``None`` when the sampling is greedy."""

    slot: int
    prompt: str
    seed: int | None

    @property
    def unit(self) -> tuple[Any, ...]:
        """Requests with the same unit are one computation: greedy, the same prompt; sampled,
        the same prompt slot (its turns, and its repeats, which reuse its seeds)."""
        return (self.prompt,) if self.seed is None else (self.prompt, self.slot)

    def to_json(self) -> list[Any]:
        return [self.slot, self.prompt, self.seed]


def prompt_digest(conversation: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(conversation)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Units:
    """One side of one cell grouped into units: key → summed counts ``[drafts, accepted,
    accepted at 0, 1, …]``, and key → the seeds its requests had."""

    counts: dict[tuple[Any, ...], tuple[float, ...]]
    seeds: dict[tuple[Any, ...], tuple[int | None, ...]]


def group(units: Sequence[AcceptanceProfile], keys: Sequence[RequestKey]) -> Units | None:
    """The per-request counts summed per unit; ``None`` when any request lacks a count."""
    if len(units) != len(keys):
        return None
    width = max(len(u.accepted_per_position or ()) for u in units) if units else 0
    counts: dict[tuple[Any, ...], list[float]] = {}
    seeds: dict[tuple[Any, ...], list[int | None]] = {}
    for u, key in zip(units, keys):
        if not u.drafts or u.accepted_tokens is None:
            return None
        row = counts.setdefault(key.unit, [0.0] * (2 + width))
        row[0] += u.drafts
        row[1] += u.accepted_tokens
        for i, a in enumerate(u.accepted_per_position or ()):
            row[2 + i] += a
        seeds.setdefault(key.unit, []).append(key.seed)
    return Units({k: tuple(v) for k, v in counts.items()},
                 {k: tuple(sorted(s, key=lambda x: -1 if x is None else x))
                  for k, s in seeds.items()})


@dataclass(frozen=True)
class Pairs:
    """The units both sides have, in one order: arrays of shape (n, 2 + positions)."""

    base: tuple[tuple[float, ...], ...]
    cand: tuple[tuple[float, ...], ...]
    same_seeds: bool

    @property
    def n(self) -> int:
        return len(self.base)


def pair(b: Units, c: Units) -> Pairs:
    shared = sorted(set(b.counts) & set(c.counts), key=repr)
    width = max([len(b.counts[k]) for k in shared] + [len(c.counts[k]) for k in shared] + [2])

    def pad(row: tuple[float, ...]) -> tuple[float, ...]:
        return row + (0.0,) * (width - len(row))

    return Pairs(tuple(pad(b.counts[k]) for k in shared), tuple(pad(c.counts[k]) for k in shared),
                 all(b.seeds[k] == c.seeds[k] for k in shared))


def column(figure: str) -> int:
    """The counts column a figure's numerator is: accepted (mean acceptance length) or accepted
    at position i."""
    if figure == "mean_acceptance_length":
        return 1
    if figure.startswith("per_position["):
        return 2 + int(figure[len("per_position["):-1])
    raise ValueError(f"no paired test for {figure}")


def _moved(half: Any) -> Any:
    """For every swap pattern, what it moves from one side to the other: Σ_j ±half_j, one row
    per pattern (half: shape (n, m)). All 2^n patterns for n ≤ EXACT_UNITS, built by doubling
    (each pair swapped or not); else the observed pattern first, then RESAMPLES random ones
    (fixed seed: the same data gives the same p)."""
    import numpy as np

    n = half.shape[0]
    if n <= EXACT_UNITS:
        sums = np.zeros((1, half.shape[1]))
        for row in half:
            sums = np.concatenate([sums + row, sums - row])
        return sums
    rng = np.random.default_rng(0)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(RESAMPLES, n))
    return np.vstack([half.sum(axis=0, keepdims=True), signs @ half])


def sign_flip_p(pairs: Pairs, figure: str, scale: float = 1.0) -> float:
    """Two-sided p-value of candidate − baseline = 0 for ``figure`` over the pairs, by swapping
    the two sides within pairs. ``scale``: the candidate's numerator multiplied by it first (a
    drop injected evenly into its requests, for ``smallest_drop``)."""
    return sign_flip_ps(pairs, [figure], scale)[figure]


def sign_flip_ps(pairs: Pairs, figures: Sequence[str], scale: float = 1.0) -> dict[str, float]:
    """``sign_flip_p`` of several figures of one cell, the swap patterns enumerated once."""
    import numpy as np

    if pairs.n == 0:
        return {f: 1.0 for f in figures}
    cols = [column(f) for f in figures]
    b, c = np.asarray(pairs.base), np.asarray(pairs.cand)
    bn, cn = b[:, cols], c[:, cols] * scale
    bd, cd = b[:, 0], c[:, 0]
    if bd.sum() <= 0 or cd.sum() <= 0:
        return {f: 1.0 for f in figures}
    observed = cn.sum(axis=0) / cd.sum() - bn.sum(axis=0) / bd.sum()
    # a swap pattern moves (c − b) / 2 of each pair from one side to the other
    moved = _moved(np.column_stack([(cd - bd) / 2, (cn - bn) / 2]))
    mid_d = (bd.sum() + cd.sum()) / 2
    mid_n = (bn.sum(axis=0) + cn.sum(axis=0)) / 2
    c_den, b_den = mid_d + moved[:, :1], mid_d - moved[:, :1]
    with np.errstate(divide="ignore", invalid="ignore"):
        diffs = (mid_n + moved[:, 1:]) / c_den - (mid_n - moved[:, 1:]) / b_den
    tol = 1e-12 * np.maximum(1.0, np.abs(observed))
    as_far = np.abs(diffs) >= np.abs(observed) - tol
    as_far |= ~np.isfinite(diffs)  # a pattern with no drafts on one side counts against the drop
    # exact; or, sampled, with the observed pattern (row 0) counted in
    share = as_far.mean(axis=0)
    return {f: float(share[i]) for i, f in enumerate(figures)}


def smallest_p(n: int) -> float:
    """The smallest two-sided p a sign-flip test over n pairs can give (exact enumeration)."""
    return 2.0 / 2 ** n if n <= EXACT_UNITS else 1.0 / (RESAMPLES + 1)


def figure_value(rows: Sequence[Sequence[float]], figure: str) -> float | None:
    drafts = sum(r[0] for r in rows)
    if drafts <= 0:
        return None
    value = sum(r[column(figure)] for r in rows) / drafts
    return 1.0 + value if figure == "mean_acceptance_length" else value


def smallest_drop(pairs: Pairs, figure: str, level: float) -> float | None:
    """The smallest relative drop X of ``figure``, on the grid ``DROP_GRID``, that the paired
    test calls at ``level`` when injected into the candidate: its accepted counts scaled
    evenly in every request so that its figure is the baseline's minus X (so the candidate
    keeps its own request-to-request noise, and the drop does not depend on how far it
    already was from the baseline). A larger drop moves the candidate further away, so the
    grid is bisected. ``None``: no drop on the grid is called, or the candidate accepts
    nothing there (no scaling moves it)."""
    base, cand = figure_value(pairs.base, figure), figure_value(pairs.cand, figure)
    if base is None or cand is None or smallest_p(pairs.n) > level:
        return None
    mean = figure == "mean_acceptance_length"
    numerator = cand - 1.0 if mean else cand
    if numerator <= 0:
        return None

    def scale(x: float) -> float:
        return ((base * (1 - x) - 1.0) if mean else base * (1 - x)) / numerator

    grid = [x for x in DROP_GRID if scale(x) >= 0]

    def caught(x: float) -> bool:
        return sign_flip_p(pairs, figure, scale(x)) <= level

    if not grid or not caught(grid[-1]):
        return None
    lo, hi = -1, len(grid) - 1  # grid[hi] is caught; grid[lo] (if any) is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if caught(grid[mid]):
            hi = mid
        else:
            lo = mid
    return grid[hi]
