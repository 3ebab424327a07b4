"""Counts that a log line does not print, recovered by search: the reference implementation.

This is the draft-count recovery as first written: every candidate draft count D that the
printed mean allows is tried in turn, from each end, until one reproduces every printed figure.
``sources.recovery`` computes the same results by arithmetic (the same interval of counts, the
same per-position counts) and is what the readers call; this module is kept as the reference
that the arithmetic is tested against (tests/sources/test_recovery_fast.py), and as its
fallback for figures not printed the way the engines print them.

vLLM's V1 ``SpecDecoding metrics`` lines and llama-server's per-request ``draft acceptance``
lines print accepted and draft tokens as integers, but the draft count D (verification steps
with a draft) only through a rounded mean acceptance length (``%.2f`` of 1 + A/D) and, when
logged, per-position rates (``%.3f`` of a_i/D). D is recovered the same way for both:

- every D that reproduces every printed figure, formatted exactly as the engine formats it,
  within the bounds the counts allow (each draft carries 1..k tokens and accepts at most k);
- one such D: the draft count, exact;
- several: the interval [lowest, highest] of them, never one of them presented as the count;
- fixed-length drafts (draft_model, EAGLE, MTP, DFlash: every draft carries k tokens): D is
  draft tokens / k, exact whatever was printed.

Per-position counts are exact when one integer a_i reproduces each rate; for large windows
(D > 1000, a printed rate covers several integers) they are the nearest integers to rate x D,
summing to A, and flagged approximate.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import NamedTuple


class Recovered(NamedTuple):
    """What one window's printed figures pin down (a named tuple: one is built per window)."""

    drafts: int | None
    per_position: tuple[int, ...] | None
    approximate_positions: bool = False
    # When ``drafts`` is None: the lowest and highest draft counts consistent with every
    # printed figure (None when the figures contradict each other or bound nothing).
    drafts_range: tuple[int, int] | None = None


def recover_counts(
    accepted: int,
    drafted: int,
    mean_printed: str | None,
    rates_printed: list[str] | tuple[str, ...] | None,
    fixed_length: bool | None,
    k: int | None = -1,
) -> Recovered:
    """``recovery.recover_counts`` by search: every candidate draft count tried in turn."""
    if k == -1:
        k = len(rates_printed) if rates_printed else None
    fixed_d = drafted // k if (fixed_length and k and drafted % k == 0) else None
    if rates_printed is not None and not rates_are_numbers(rates_printed):
        return Recovered(fixed_d, None)  # not rates as an engine prints them: nothing fits
    zeros = tuple(0 for _ in (rates_printed or ()))
    if drafted == 0:
        return Recovered(0, zeros) if accepted == 0 else Recovered(None, None)
    lo = max(1, -(-drafted // k), -(-accepted // k)) if k else 1
    hi = drafted
    if accepted == 0:
        if fixed_d is not None:
            return Recovered(fixed_d, zeros if rates_printed is not None else None)
        if lo == hi:
            return Recovered(lo, zeros if rates_printed is not None else None)
        return Recovered(None, None, drafts_range=(lo, hi))
    if mean_printed is None:
        if fixed_d is not None:
            return Recovered(fixed_d, None)
        return Recovered(lo, None) if lo == hi else Recovered(None, None, drafts_range=(lo, hi))
    if fixed_d is not None:
        candidates: list[int] | None = [fixed_d]
    else:
        candidates = _drafts_fitting_mean(accepted, mean_printed, lo, hi)
        if candidates is None:  # too many to try one by one: the bounds the mean sets
            return Recovered(None, None, drafts_range=mean_bounds(accepted, mean_printed, lo, hi))
    first = _first_fit(candidates, accepted, rates_printed)
    last = first
    if first is not None and len(candidates) > 1:
        last = _first_fit(candidates[::-1], accepted, rates_printed)
    if first is not None and last is not None and first[0] == last[0]:
        d, pos = first
        return Recovered(d, pos[0], pos[1]) if pos is not None else Recovered(d, None)
    if fixed_d is not None:
        # The fixed-length count is exact even if printed rates are inconsistent (a fork's
        # different rounding); keep D, drop positions.
        return Recovered(fixed_d, None)
    if first is None or last is None:
        return Recovered(None, None)
    return Recovered(None, None, drafts_range=(first[0], last[0]))


def _first_fit(candidates: list[int], accepted: int,
               rates_printed: list[str] | tuple[str, ...] | None
               ) -> tuple[int, tuple[tuple[int, ...], bool] | None] | None:
    """The first candidate D (in the order given) that reproduces the per-position rates too,
    with its positions; only the ends of the set matter, so the middle is never tried."""
    for d in candidates:
        if rates_printed is None:
            return d, None
        pos = _positions_for(d, accepted, rates_printed)
        if pos is not None:
            return d, pos
    return None


def candidate_drafts(accepted: int, drafted: int, mean_printed: str, k: int) -> list[int]:
    """Every D in [ceil(drafted / k), drafted] whose mean prints as ``mean_printed`` ([] when
    more than 100 000 would have to be tried)."""
    fits = _drafts_fitting_mean(accepted, mean_printed, max(1, -(-drafted // k)), drafted)
    return fits or []


def mean_bounds(accepted: int, mean_printed: str, lo: int, hi: int) -> tuple[int, int] | None:
    """[lo, hi] narrowed by the printed mean to within its rounding (half a hundredth, with a
    margin: a superset of the D that print it)."""
    try:
        m = float(mean_printed)
    except ValueError:
        return None
    if not math.isfinite(m):
        return None
    lo_ratio, hi_ratio = m - 1 - 0.0051, m - 1 + 0.0051
    if hi_ratio > 0:
        lo = max(lo, int(accepted / hi_ratio))
    if lo_ratio > 0:
        hi = min(hi, int(accepted / lo_ratio) + 1)
    return (lo, hi) if lo <= hi else None


def _drafts_fitting_mean(accepted: int, mean_printed: str, lo: int, hi: int) -> list[int] | None:
    """The D in [lo, hi] with "%.2f" % (1 + accepted / D) == mean_printed; None when more
    than 100 000 candidates would have to be formatted one by one."""
    bounds = mean_bounds(accepted, mean_printed, lo, hi)
    if bounds is None:
        return []
    d_min, d_max = bounds
    if d_max - d_min > 100_000:
        return None
    fits = _mean_fits(accepted, mean_printed, d_min, d_max)
    if fits is not None:
        return fits
    return [d for d in range(d_min, d_max + 1) if "%.2f" % (1 + accepted / d) == mean_printed]


# Exact shortcuts for vLLM's formatting. A float a/d printed with n decimals is a/d rounded
# to n decimals (Python prints the double exactly, halves to even). The double differs from
# the real a/d by under 1e-15 when a/d < 1000, and a real a/d that is not on a rounding
# boundary (2j+1)/(2*10^n) stays at least 1/(2*10^n*d) from it (> 2e-13 while d < 2^31): so
# the double rounds as the real quotient does, which integer arithmetic decides. Quotients
# exactly on a boundary (rare) are formatted as vLLM formats them. Outside these bounds, or
# for a printed figure not in the form Python prints, the callers format every candidate.
EXACT_MAX_D = 1 << 31


@lru_cache(maxsize=1 << 12)
def printed_units(printed: str, decimals: int, max_units: int) -> int | None:
    """The printed figure in units of 10^-decimals, if it is written as Python writes a
    non-negative float with that many decimals and is at most max_units; else None."""
    whole, dot, frac = printed.partition(".")
    if (not dot or len(frac) != decimals or not whole.isdigit() or not frac.isdigit()
            or not whole.isascii() or not frac.isascii() or (len(whole) > 1 and whole[0] == "0")):
        return None
    units = int(whole + frac)
    return units if units <= max_units else None


def rate_fits(s: int, d: int, r: str) -> tuple[int, int]:
    """[lowest, highest] integer a with f"{a/d:.3f}" == r, r printing s thousandths (empty
    when lowest > highest); 0 < d < 2^31, s <= 2000."""
    # a fits iff (2s-1)d < 2000a < (2s+1)d, boundaries decided by formatting.
    lo_num, hi_num = (2 * s - 1) * d, (2 * s + 1) * d
    a_lo = lo_num // 2000 + 1
    if lo_num % 2000 == 0 and a_lo - 1 >= 0 and f"{(a_lo - 1) / d:.3f}" == r:
        a_lo -= 1
    a_hi = -(-hi_num // 2000) - 1
    if hi_num % 2000 == 0 and f"{(a_hi + 1) / d:.3f}" == r:
        a_hi += 1
    return max(a_lo, 0), a_hi


def mean_span(accepted: int, mean_printed: str, d_min: int, d_max: int) -> range | None:
    """The d in [d_min, d_max] with "%.2f" % (1 + accepted / d) == mean_printed (a range: the
    mean prints the same for consecutive counts), or None when the exact shortcut does not apply
    (see above)."""
    units = printed_units(mean_printed, 2, 100_000)
    if units is None:
        return None if mean_printed.isascii() and mean_printed[:1].isdigit() else range(0)
    if d_max >= EXACT_MAX_D or accepted >= EXACT_MAX_D or d_min < 1:
        return None
    c = units - 100  # hundredths of accepted / d
    # d fits iff (2c-1)d < 200a < (2c+1)d, boundaries decided by formatting.
    a200 = 200 * accepted
    if 2 * c + 1 <= 0:
        return range(0)
    lo, hi = d_min, d_max
    lo = max(lo, a200 // (2 * c + 1) + (1 if a200 % (2 * c + 1) else 0))
    if 2 * c - 1 > 0:
        hi = min(hi, -(-a200 // (2 * c - 1)) - 1 + (0 if a200 % (2 * c - 1) else 1))
    # exact ties sit at the ends: keep them only if they print as vLLM prints them
    if (lo <= hi and a200 % (2 * c + 1) == 0 and lo == a200 // (2 * c + 1)
            and "%.2f" % (1 + accepted / lo) != mean_printed):
        lo += 1
    if (lo <= hi and 2 * c - 1 > 0 and a200 % (2 * c - 1) == 0 and hi == a200 // (2 * c - 1)
            and "%.2f" % (1 + accepted / hi) != mean_printed):
        hi -= 1
    return range(lo, hi + 1)


def _mean_fits(accepted: int, mean_printed: str, d_min: int, d_max: int) -> list[int] | None:
    """``mean_span`` as a list of candidates."""
    span = mean_span(accepted, mean_printed, d_min, d_max)
    return None if span is None else list(span)


def _positions_for(
    d: int, accepted: int, rates_printed: list[str] | tuple[str, ...]
) -> tuple[tuple[int, ...], bool] | None:
    """Integer a_i with f"{a_i/d:.3f}" == printed, non-increasing, summing to accepted."""
    exact = 0 < d < EXACT_MAX_D
    if d < 1000:
        # Below 1000 drafts a printed rate covers less than one integer (0.001 * d < 1), so
        # the only candidate is the nearest to rate*d: it fits, or no integer does.
        guess = []
        for r in rates_printed:
            if r == "nan":
                return None
            a = round(float(r) * d)
            s = printed_units(r, 3, 2000) if exact else None
            if s is not None:
                a_lo, a_hi = rate_fits(s, d, r)
                if not a_lo <= a <= a_hi:
                    return None
            elif f"{a / d:.3f}" != r:
                return None
            guess.append(a)
        pos = tuple(guess)
        return (pos, False) if sum(pos) == accepted and non_increasing(pos) else None
    lows: list[int] = []
    highs: list[int] = []
    for r in rates_printed:
        if r == "nan":
            return None
        s = printed_units(r, 3, 2000) if exact else None
        if s is not None:
            # exactly the integers that print as r (all within rate*d +- 0.0005*d), in [0, d]
            a_lo, a_hi = rate_fits(s, d, r)
            a_hi = min(a_hi, d)
        else:
            centre = float(r) * d
            lo = max(0, math.floor(centre - 0.0006 * d) - 1)
            hi = min(d, math.ceil(centre + 0.0006 * d) + 1)
            ok = [a for a in range(lo, hi + 1) if f"{a / d:.3f}" == r]
            if not ok:
                return None
            a_lo, a_hi = ok[0], ok[-1]
        if a_lo > a_hi:
            return None
        lows.append(a_lo)
        highs.append(a_hi)
    if not sum(lows) <= accepted <= sum(highs):
        return None
    if lows == highs:
        pos = tuple(lows)
        return (pos, False) if non_increasing(pos) else None
    return nearest_summing(d, accepted, rates_printed, lows, highs)


def nearest_summing(d: int, accepted: int, rates_printed: list[str] | tuple[str, ...],
                    lows: list[int], highs: list[int]) -> tuple[tuple[int, ...], bool] | None:
    """Per-position counts when several integers print the same rate (lows[i]..highs[i], with
    sum(lows) <= accepted <= sum(highs)): the nearest to rate*d, then the sum fixed by moving
    the first positions as far as they go. Exact sums, approximate split; None when the result
    is not non-increasing."""
    pos_l = []
    for r, lo, hi in zip(rates_printed, lows, highs):
        a = round(float(r) * d)
        pos_l.append(lo if a < lo else hi if a > hi else a)
    diff = accepted - sum(pos_l)
    for i in range(len(pos_l)):
        if diff == 0:
            break
        room = (highs[i] - pos_l[i]) if diff > 0 else (lows[i] - pos_l[i])
        step = min(diff, room) if diff > 0 else max(diff, room)
        pos_l[i] += step
        diff -= step
    pos = tuple(pos_l)
    return (pos, True) if diff == 0 and non_increasing(pos) else None


def positions_for(d: int, accepted: int, rates_printed: list[str] | tuple[str, ...]
                  ) -> tuple[tuple[int, ...], bool] | None:
    """``recovery.positions_for`` for any printed rates (the candidates formatted if need be)."""
    if d <= 0 or not all(_is_number(r) for r in rates_printed):
        return None
    return _positions_for(d, accepted, rates_printed)


_RATE = re.compile(r"nan|\d{1,9}\.\d{1,9}")


def rates_are_numbers(rates: list[str] | tuple[str, ...]) -> bool:
    """Whether every printed rate is "nan" or a plain decimal (as engines print them)."""
    match = _RATE.fullmatch
    return all(match(r) for r in rates)


def _is_number(r: str) -> bool:
    """A finite number, or "nan" as Python prints it (a window without drafts)."""
    try:
        x = float(r)
    except ValueError:
        return False
    return math.isfinite(x) or r == "nan"


def non_increasing(xs: tuple[int, ...]) -> bool:
    return list(xs) == sorted(xs, reverse=True)
