"""95% confidence intervals by bootstrap over independent units (requests or log windows).

Drafts inside one request are not independent (a hard passage lowers every draft in it), so a
binomial interval on pooled counts is too narrow. Instead whole units are resampled with
replacement and each ratio is recomputed from the resampled counter sums.

Below ``MIN_UNITS`` units no interval is given: benchmarks/interval_coverage.py simulates
profiles with a known rate and counts how often the interval covers it; with fewer units it
covers the true value in well under 90% of trials (two units give just their range), so a
number printed as a "95% interval" there would mislead. ``UnitBlocks.unavailable`` says why.

A unit whose draft count is not known but bounded (``drafts_range``: a log line that prints
accepted and draft tokens but not the draft count) keeps both bounds. Figures that need no draft
count (the acceptance rate) get their interval as usual; those that do (mean acceptance length,
accepted per draft) get an interval on the bounds: from the 2.5th percentile of the figure at the
highest draft counts to the 97.5th at the lowest, so it holds whatever the counts were.

Many units (a day of log windows) are folded, as they stream in, into between ``max_blocks``
and ``2 * max_blocks`` blocks of consecutive units: a block bootstrap, which keeps neighbouring
windows together, is if anything more conservative, and needs constant memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile, Interval

# The fewest units with an interval: from benchmarks/results/interval_coverage.txt, the
# smallest number from which the interval covers the true value in at least 90% of simulated
# trials, for every figure and both simulated cases (log windows, requests).
MIN_UNITS = 15
COVERAGE_RESULTS = "benchmarks/results/interval_coverage.txt"


def bootstrap_intervals(
    units: Sequence[AcceptanceProfile],
    *,
    resamples: int = 2000,
    max_blocks: int = 500,
    seed: int = 0,
    min_units: int | None = None,
) -> dict[str, Interval]:
    """Intervals for mean_acceptance_length, acceptance_rate and each per-position rate.

    Returns an empty dict when the data allows no interval: fewer than two units, or units
    without the counts a figure needs.
    """
    return _blocks(units, max_blocks).intervals(resamples=resamples, seed=seed,
                                                min_units=min_units)


def _blocks(units: Sequence[AcceptanceProfile], max_blocks: int) -> UnitBlocks:
    blocks = UnitBlocks(max_blocks)
    for u in units:
        blocks.add(u)
    return blocks


def with_bootstrap(profile: AcceptanceProfile, units: Sequence[AcceptanceProfile],
                   unit: str = "requests", **kw: int) -> AcceptanceProfile:
    """PROFILE with the intervals of a bootstrap over UNITS, or with the reason there are none
    (too few units, units without counts), so a table says why instead of showing nothing."""
    blocks = _blocks(units, kw.pop("max_blocks", 500))
    intervals = blocks.intervals(**kw)
    return profile.with_intervals(intervals, unavailable=blocks.unavailable(
        unit, kw.get("min_units")))


class UnitBlocks:
    """Units folded into at most ``2 * max_blocks`` consecutive blocks, in constant memory.

    Each block holds the counter sums of ``size`` consecutive units (lowest and highest draft
    count, draft tokens, accepted tokens, then accepted at each position); when the blocks fill
    up, neighbours merge pairwise and ``size`` doubles. So a stream of any length keeps a
    bounded table, and the bootstrap resamples blocks of neighbouring units.
    """

    def __init__(self, max_blocks: int = 500) -> None:
        self.max_blocks = max_blocks
        self.size = 1
        self.rows: list[list[float]] = []
        self._current: list[float] | None = None
        self._in_current = 0
        self.units = 0
        self.usable = True
        self.has_pos = True
        self.exact = True   # every unit's draft count known (not only bounded)

    def add(self, u: AcceptanceProfile) -> None:
        self.units += 1
        if not self.usable:
            return
        bounds = u.drafts_bounds
        if (not u.count_weighted or bounds is None or u.draft_tokens is None
                or u.accepted_tokens is None):
            self.usable = False
            return
        if u.accepted_per_position is None:
            self.has_pos = False
        if bounds[0] != bounds[1]:
            self.exact = False
        cur = self._current
        if cur is None:
            cur = self._current = [0.0, 0.0, 0.0, 0.0]
        cur[0] += bounds[0]
        cur[1] += bounds[1]
        cur[2] += u.draft_tokens
        cur[3] += u.accepted_tokens
        per_pos = u.accepted_per_position or ()
        if len(cur) < _POS + len(per_pos):
            cur.extend([0.0] * (_POS + len(per_pos) - len(cur)))
        for i, a in enumerate(per_pos, _POS):
            cur[i] += a
        self._in_current += 1
        if self._in_current == self.size:
            self._push()

    def _push(self) -> None:
        assert self._current is not None
        self.rows.append(self._current)
        self._current, self._in_current = None, 0
        if len(self.rows) >= 2 * self.max_blocks:
            self.rows = [_add_rows(a, b) for a, b in zip(self.rows[::2], self.rows[1::2])]
            self.size *= 2

    def unavailable(self, unit: str = "units", min_units: int | None = None) -> str | None:
        """Why ``intervals`` gives nothing, or None when it gives intervals."""
        least = MIN_UNITS if min_units is None else min_units
        if not self.usable:
            return f"no 95% interval: some {unit} have no draft count, nor bounds on it"
        if self.units < least:
            return (f"no 95% interval: {self.units} {unit}, fewer than the {least} from which "
                    f"a bootstrap interval covers the true value in at least 90% of simulated "
                    f"trials ({COVERAGE_RESULTS})")
        return None

    def all_rows(self) -> list[list[float]]:
        """The blocks, the last one possibly partial."""
        return self.rows + ([self._current] if self._current is not None else [])

    def intervals(self, resamples: int = 2000, seed: int = 0, min_units: int | None = None
                  ) -> dict[str, Interval]:
        if not self.usable or self.units < (MIN_UNITS if min_units is None else min_units):
            return {}
        return _intervals(self.all_rows(), self.has_pos and self.exact, self.exact, resamples,
                          seed)

    @classmethod
    def joined(cls, parts: Sequence[UnitBlocks]) -> UnitBlocks:
        """The blocks of several independent streams (several log files) side by side, in the
        order given: a block never spans two streams."""
        out = cls(max(p.max_blocks for p in parts) if parts else 500)
        for p in parts:
            out.units += p.units
            out.usable = out.usable and p.usable
            out.has_pos = out.has_pos and p.has_pos
            out.exact = out.exact and p.exact
            out.rows.extend(list(r) for r in p.all_rows())
        return out


def _add_rows(a: list[float], b: list[float]) -> list[float]:
    if len(a) < len(b):
        a, b = b, a
    return [x + (b[i] if i < len(b) else 0.0) for i, x in enumerate(a)]


_POS = 4  # the column of position 0 in a block's row


def _intervals(rows_l: list[list[float]], has_pos: bool, exact: bool, resamples: int, seed: int
               ) -> dict[str, Interval]:
    import numpy as np  # here: reading a log without an interval needs no numpy

    width = max(len(r) for r in rows_l)
    rows = np.zeros((len(rows_l), width), dtype=np.float64)
    for i, r in enumerate(rows_l):
        rows[i, : len(r)] = r
    width -= _POS
    n = rows.shape[0]
    rng = np.random.default_rng(seed)
    # how often each block is drawn in each resample: n draws with replacement per resample
    draws = rng.integers(0, n, size=(resamples, n)) + (np.arange(resamples) * n)[:, None]
    weights = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n)
    sums = weights @ rows  # resamples x columns
    drafts, most, draft_tokens, accepted = sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3]
    out: dict[str, Interval] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        if exact:
            _put(out, "mean_acceptance_length", 1.0 + accepted / drafts)
            _put(out, "accepted_per_draft", accepted / drafts)
        else:  # on the bounds: the fewest drafts give the highest figure
            _put_bounds(out, "mean_acceptance_length", 1.0 + accepted / most,
                        1.0 + accepted / drafts)
            _put_bounds(out, "accepted_per_draft", accepted / most, accepted / drafts)
        _put(out, "acceptance_rate", accepted / draft_tokens)
        if has_pos:
            for i in range(width):
                _put(out, f"per_position[{i}]", sums[:, _POS + i] / drafts)
    return out


def _put_bounds(out: dict[str, Interval], name: str, lows: Any, highs: Any) -> None:
    """An interval on the bounds: the 2.5th percentile of the lowest values to the 97.5th of
    the highest."""
    import numpy as np

    lo, hi = lows[np.isfinite(lows)], highs[np.isfinite(highs)]
    if lo.size and hi.size:
        out[name] = Interval(float(np.percentile(lo, 2.5)), float(np.percentile(hi, 97.5)),
                             "bootstrap on the bounds of the draft count")


def _put(out: dict[str, Interval], name: str, samples: Any) -> None:
    import numpy as np

    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return
    low, high = np.percentile(finite, [2.5, 97.5])
    out[name] = Interval(float(low), float(high), "bootstrap")
