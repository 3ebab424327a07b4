"""Counts that a log line does not print, recovered from the figures it does print, by arithmetic.

vLLM's V1 ``SpecDecoding metrics`` lines and llama-server's per-request ``draft acceptance``
lines print accepted (A) and draft tokens as integers, but the draft count D (verification
steps with a draft) only through a rounded mean acceptance length (``%.2f`` of 1 + A/D) and,
when logged, per-position rates (``%.3f`` of a_i/D: vllm/v1/spec_decode/metrics.py formats each
rate with Python's ``f"{p:.3f}"`` and the mean with ``%.2f``, so a figure is the double a/D
rounded half-to-even at its exact binary value). Both readers recover D here:

- every D that reproduces every printed figure, within the bounds the counts allow (each draft
  carries 1..k tokens and accepts at most k); one such D: the draft count, exact; several: the
  interval [lowest, highest] of them, never one of them presented as the count;
- fixed-length drafts (draft_model, EAGLE, MTP, DFlash: every draft carries k tokens): D is
  draft tokens / k, exact whatever was printed;
- per-position counts are exact when one integer a_i reproduces each rate; for large windows
  (D > 1000, a printed rate covers several integers) they are the nearest integers to rate x D,
  summing to A, and flagged approximate.

The results are those of trying every candidate D in turn (``sources.recovery_search``, the
reference this module is tested against), computed instead of searched:

- the integers a that print as rate r (s thousandths) over D form an interval,
  (2s-1)D < 2000a < (2s+1)D, its ends decided by formatting only when they fall exactly on a
  rounding boundary (``rate_fits``); the counts D that print mean m likewise
  (``mean_span``: (2c-1)D < 200A < (2c+1)D, c = hundredths of m - 1);
- the lowest and highest a_i that print as r_i never decrease as D grows (a/D only falls), so
  neither do their sums L(D) and H(D); a D reproduces the rates only if L(D) <= A <= H(D),
  so the fitting D lie in [D1, D2] (D1 the first D with H(D) >= A, D2 the last with
  L(D) <= A), found by bisection inside brackets computed from sum(2s_i +- 1) (a few steps);
- the conditions that are not monotone in D (each rate covering at least one integer below
  1000 drafts, per-position counts non-increasing) are checked at the ends of [D1, D2] only,
  moving inwards past a D that fails them: the first and last fitting D are those of the
  search, without trying the candidates that the sums already rule out.

Figures not printed the way the engines print them (a rate not of the form ``0.123``, a mean
not ``2.34``, counts past 2^31) go to the reference search, which formats candidates one by one.
"""

from __future__ import annotations

from collections.abc import Callable

from specdoctor.sources import recovery_search as search
from specdoctor.sources.recovery_search import (
    EXACT_MAX_D,
    Recovered,
    mean_bounds,
    mean_span,
    nearest_summing,
    non_increasing,
    rate_fits,
)

__all__ = ["Recovered", "positions_for", "recover_counts", "recovery_notes"]

# Every way "%.3f" prints a rate in [0, 2] (the rates the exact shortcuts cover): its
# thousandths. A rate printed any other way is not in this table.
_THOUSANDTHS = {f"{s // 1000}.{s % 1000:03d}": s for s in range(2001)}


def recover_counts(
    accepted: int,
    drafted: int,
    mean_printed: str | None,
    rates_printed: list[str] | tuple[str, ...] | None,
    fixed_length: bool | None,
    k: int | None = -1,
) -> Recovered:
    """The draft count and per-position counts of one window (see the module doc).

    ``k`` is the most tokens one draft carries; by default the length of the per-position
    list (vLLM prints one rate per position up to k); None when unknown (llama.cpp).
    """
    units = _units(rates_printed) if rates_printed is not None else None
    if ((rates_printed is not None and not units) or accepted <= 0 or drafted <= 0
            or mean_printed is None or accepted > drafted):
        # nothing to search (nothing drafted or accepted, no mean), or figures printed
        # another way: the reference decides
        return search.recover_counts(accepted, drafted, mean_printed, rates_printed,
                                     fixed_length, k)
    if k == -1:
        k = len(rates_printed) if rates_printed else None
    if fixed_length and k and drafted % k == 0:
        d = drafted // k
        if rates_printed is None or units is None:
            return Recovered(d, None)
        if d >= EXACT_MAX_D:
            return search.recover_counts(accepted, drafted, mean_printed, rates_printed,
                                         fixed_length, k)
        pos = _fit(d, accepted, rates_printed, units)
        # the fixed-length count is exact even if the rates disagree (a fork's rounding)
        return Recovered(d, pos[0], pos[1]) if pos is not None else Recovered(d, None)
    lo = max(1, -(-drafted // k), -(-accepted // k)) if k else 1
    bounds = mean_bounds(accepted, mean_printed, lo, drafted)
    if bounds is None:
        return Recovered(None, None)
    if bounds[1] - bounds[0] > 100_000:  # as the reference: too many candidates to tell apart
        return Recovered(None, None, drafts_range=bounds)
    span = mean_span(accepted, mean_printed, *bounds)
    if span is None:
        return search.recover_counts(accepted, drafted, mean_printed, rates_printed,
                                     fixed_length, k)
    if not span:
        return Recovered(None, None)
    if rates_printed is None or units is None:
        first, last = span[0], span[-1]
        return (Recovered(first, None) if first == last
                else Recovered(None, None, drafts_range=(first, last)))
    d_lo, d_hi = _sum_bounds(accepted, rates_printed, units, span[0], span[-1])
    found = _scan(range(d_lo, d_hi + 1), accepted, rates_printed, units)
    if found is None:
        return Recovered(None, None)
    first, pos = found
    top = _scan(range(d_hi, first, -1), accepted, rates_printed, units)
    if top is None:
        return Recovered(first, pos[0], pos[1])
    return Recovered(None, None, drafts_range=(first, top[0]))


def positions_for(d: int, accepted: int, rates_printed: list[str] | tuple[str, ...]
                  ) -> tuple[tuple[int, ...], bool] | None:
    """Per-position counts for a known draft count ``d`` (and whether they are approximate),
    or None when no non-increasing integers summing to ``accepted`` print as given."""
    units = _units(rates_printed)
    if units is None or not 0 < d < EXACT_MAX_D:
        return search.positions_for(d, accepted, rates_printed)
    return _fit(d, accepted, rates_printed, units)


def recovery_notes(rec: Recovered) -> tuple[str, ...]:
    """What a window built from ``rec`` says about its counts (the same words in every reader,
    so a total lists each once)."""
    if rec.drafts is None:
        if rec.drafts_range is not None:
            return (("draft count not printed and not pinned down by the printed figures: "
                     "reported as the range of counts consistent with them"),)
        return ("draft count not recoverable: no count reproduces every printed figure",)
    if rec.approximate_positions:
        return ("per-position counts rounded from 3-decimal rates",)
    return ()


def _units(rates: list[str] | tuple[str, ...]) -> list[int] | None:
    """Each rate in thousandths, or None if one is not printed as "%.3f" prints [0, 2]."""
    get = _THOUSANDTHS.get
    units = [get(r) for r in rates]
    return None if None in units else units  # type: ignore[return-value]


def _intervals(d: int, units: list[int], rates: list[str] | tuple[str, ...]
               ) -> tuple[list[int], list[int]]:
    """For each rate, the lowest and highest integer a that print as it over d (``rate_fits``,
    its arithmetic inline where no end of (2s-1)d/2000 < a < (2s+1)d/2000 is a whole number);
    lowest > highest where none does."""
    lows: list[int] = []
    highs: list[int] = []
    for s, r in zip(units, rates):
        lo_num = (2 * s - 1) * d
        hi_num = lo_num + 2 * d
        if lo_num % 2000 and hi_num % 2000:
            lows.append(lo_num // 2000 + 1 if s else 0)
            highs.append(hi_num // 2000)
        else:
            a_lo, a_hi = rate_fits(s, d, r)
            lows.append(a_lo)
            highs.append(a_hi)
    return lows, highs


def _fit(d: int, accepted: int, rates: list[str] | tuple[str, ...], units: list[int]
         ) -> tuple[tuple[int, ...], bool] | None:
    """Integer a_i printing as ``rates`` over d, non-increasing, summing to ``accepted`` (what
    the reference's ``_positions_for`` returns, for rates in ``_THOUSANDTHS``, 0 < d < 2^31)."""
    lows, highs = _intervals(d, units, rates)
    if d < 1000:
        # A printed rate covers less than one integer: the one that prints it, or none (that
        # integer is also the reference's nearest to rate*d, within 0.0005*d < 0.5 of it).
        if lows != highs:
            return None
        exact = tuple(lows)
        return (exact, False) if sum(exact) == accepted and non_increasing(exact) else None
    # From 1000 drafts every rate covers an integer; only a rate from 1.000 up reaches past d,
    # the most drafts that can accept position i.
    if max(units) >= 1000:
        highs = [min(a_hi, d) for a_hi in highs]
        if any(a_lo > a_hi for a_lo, a_hi in zip(lows, highs)):
            return None
    if not sum(lows) <= accepted <= sum(highs):
        return None
    if lows == highs:
        exact = tuple(lows)
        return (exact, False) if non_increasing(exact) else None
    return nearest_summing(d, accepted, rates, lows, highs)


def _scan(ds: range, accepted: int, rates: list[str] | tuple[str, ...], units: list[int]
          ) -> tuple[int, tuple[tuple[int, ...], bool]] | None:
    """The first d of ``ds`` (in its order) whose positions fit, with them."""
    for d in ds:
        pos = _fit(d, accepted, rates, units)
        if pos is not None:
            return d, pos
    return None


def _sum_bounds(accepted: int, rates: list[str] | tuple[str, ...], units: list[int], lo: int,
                hi: int) -> tuple[int, int]:
    """[D1, D2] within [lo, hi]: outside it no D has per-position intervals that can sum to
    ``accepted`` (L(D) <= accepted <= H(D) fails; see the module doc). D1 > D2 when no D can.
    Only D in [lo, hi] are evaluated."""
    def high_sum(d: int) -> int:
        return sum(_intervals(d, units, rates)[1])

    def low_sum(d: int) -> int:
        return sum(_intervals(d, units, rates)[0])

    # Each highest a_i is within 1 below (2s_i+1)D/2000: with c = sum(2s_i+1), H(D) < A
    # below 2000A/c, and H(D) >= A from 2000(A+k)/c on.
    c = sum(2 * s + 1 for s in units)
    a = max(lo, -(-2000 * accepted // c))
    d1 = _least(high_sum, accepted, a, max(a, min(hi + 1, -(-2000 * (accepted + len(units)) // c))))
    # Each lowest a_i is within 1 above (2s_i-1)D/2000 when s_i > 0, and 0 when s_i = 0: with
    # c2 = sum(2s_i-1) over the k2 rates s_i > 0, L(D) <= A up to 2000(A-k2)/c2 and L(D) > A
    # above 2000A/c2. D2 is one less than the least D with L(D) > A.
    c2 = sum(2 * s - 1 for s in units if s)
    if c2 == 0:  # every rate 0.000: L(D) = 0 for every D
        return d1, hi
    k2 = sum(1 for s in units if s)
    a = max(lo, 2000 * (accepted - k2) // c2)
    d2 = _least(low_sum, accepted + 1, a, max(a, min(hi + 1, 2000 * accepted // c2 + 1))) - 1
    return d1, min(d2, hi)


def _least(f: Callable[[int], int], target: int, a: int, b: int) -> int:
    """The least d in [a, b) with f(d) >= target, else b, for f non-decreasing (bisection;
    f(b) is never evaluated)."""
    while a < b:
        mid = (a + b) // 2
        if f(mid) >= target:
            b = mid
        else:
            a = mid + 1
    return a
