"""Comparing acceptance profiles (pure): per-position conventions converted, two profiles that
differ beyond their intervals, drift over uptime.

Per-position rates are unconditional (accepted at i / drafts, vLLM's) unless a name says
conditional (accepted at i given accepted at i-1); accepted per draft does NOT count the bonus
token. Used by the signature (diagnose) and by the experiments that decide on the same figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdoctor.acceptance.profile import AcceptanceProfile, ProfileSum, sum_profiles

# Fewer uptime windows than this say nothing about drift (a third of them is compared).
MIN_DRIFT_WINDOWS = 6
# Uptime bins kept for drift: a log of any length is read in this much memory.
UPTIME_BINS = 1024


def unconditional_from_conditional(rates: Sequence[float]) -> list[float]:
    """Conditional rates (i given i-1) → unconditional (accepted at i / drafts)."""
    out, acc = [], 1.0
    for r in rates:
        acc *= r
        out.append(acc)
    return out


def conditional_from_unconditional(rates: Sequence[float]) -> list[float | None]:
    """Unconditional → conditional; None where the previous position is never accepted."""
    out: list[float | None] = []
    prev = 1.0
    for r in rates:
        out.append(r / prev if prev > 0 else None)
        prev = r
    return out


def _apd_interval(p: AcceptanceProfile) -> tuple[float, float] | None:
    iv = p.intervals.get("accepted_per_draft")
    return None if iv is None else (iv.low, iv.high)


def differs(a: AcceptanceProfile, b: AcceptanceProfile, share: float) -> bool:
    """Accepted per draft differs: disjoint intervals when both have them, else by ``share``."""
    xa, xb = a.accepted_per_draft, b.accepted_per_draft
    if xa is None or xb is None:
        return False
    ia, ib = _apd_interval(a), _apd_interval(b)
    if ia is not None and ib is not None:
        return ia[1] < ib[0] or ib[1] < ia[0]
    return abs(xa - xb) > share * max(xa, xb, 1e-9)


def drift(windows: Sequence[AcceptanceProfile]) -> tuple[float, float] | None:
    """(first third, last third) accepted per draft over uptime; None if too few windows."""
    ws = [w for w in windows if w.has_drafts and w.count_weighted]
    if len(ws) < MIN_DRIFT_WINDOWS:
        return None
    third = len(ws) // 3
    first = sum_profiles(ws[:third]).accepted_per_draft
    last = sum_profiles(ws[-third:]).accepted_per_draft
    if first is None or last is None:
        return None
    return first, last


class UptimeBins:
    """The windows drift reads (drafted, count-weighted), kept in bounded memory: each window
    as it is up to ``cap`` of them; past that, consecutive windows summed into bins of equal
    width (doubled, by merging neighbours, each time the bins reach twice ``cap``). ``drift``
    over the bins is ``drift`` over the windows when there are at most ``cap``; past that the
    thirds it compares end on a bin's edge (at most one bin, under 1/``cap`` of the uptime,
    from the windows' own thirds)."""

    def __init__(self, cap: int = UPTIME_BINS) -> None:
        if cap < MIN_DRIFT_WINDOWS:
            raise ValueError(f"cap {cap}: fewer bins than drift reads")
        self.cap, self.width, self.windows = cap, 1, 0
        self._full: list[ProfileSum] = []
        self._open = ProfileSum()

    def add(self, p: AcceptanceProfile) -> None:
        if not (p.has_drafts and p.count_weighted):
            return
        self.windows += 1
        self._open.add(p)
        if self._open.n < self.width:
            return
        self._full.append(self._open)
        self._open = ProfileSum()
        if len(self._full) == 2 * self.cap:
            pairs = zip(self._full[0::2], self._full[1::2])
            self._full = [_merged(a, b) for a, b in pairs]
            self.width *= 2

    def profiles(self) -> tuple[AcceptanceProfile, ...]:
        """The bins in uptime order (the last one possibly part-full)."""
        bins = self._full + ([self._open] if self._open.n else [])
        return tuple(b.result() for b in bins)


def _merged(a: ProfileSum, b: ProfileSum) -> ProfileSum:
    a.merge(b)
    return a
