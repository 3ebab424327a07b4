"""The draft-count recovery's exact integer shortcuts against the formatting they replace:
the reference functions below are the recovery as it was before the shortcuts (formatting
every candidate as vLLM does), and both the search (``recovery_search``) and the arithmetic
that the readers use (``recovery``) must agree with it on every input."""

import math
import random

import pytest

from specdoctor.sources import recovery, recovery_search


def reference_candidate_drafts(accepted: int, drafted: int, mean_printed: str, k: int) -> list[int]:
    m = float(mean_printed)
    lo_ratio, hi_ratio = m - 1 - 0.0051, m - 1 + 0.0051
    d_min = max(1, -(-drafted // k))
    d_max = drafted
    if hi_ratio > 0:
        d_min = max(d_min, int(accepted / hi_ratio))
    if lo_ratio > 0:
        d_max = min(d_max, int(accepted / lo_ratio) + 1)
    if d_max - d_min > 100_000:
        return []
    return [d for d in range(d_min, d_max + 1) if "%.2f" % (1 + accepted / d) == mean_printed]


def reference_positions_for(
    d: int, accepted: int, rates_printed: list[str] | tuple[str, ...]
) -> tuple[tuple[int, ...], bool] | None:
    """Integer a_i with f"{a_i/d:.3f}" == printed, non-increasing, summing to accepted."""
    if d < 1000:
        # Below 1000 drafts a printed rate covers less than one integer (0.001 * d < 1), so
        # the only candidate is the nearest to rate*d: it fits, or no integer does.
        guess = []
        for r in rates_printed:
            if r == "nan":
                return None
            a = round(float(r) * d)
            if f"{a / d:.3f}" != r:
                return None
            guess.append(a)
        pos = tuple(guess)
        return (pos, False) if sum(pos) == accepted and recovery_search.non_increasing(pos) else None
    ranges: list[range] = []
    for r in rates_printed:
        if r == "nan":
            return None
        centre = float(r) * d
        lo = max(0, math.floor(centre - 0.0006 * d) - 1)
        hi = min(d, math.ceil(centre + 0.0006 * d) + 1)
        ok = [a for a in range(lo, hi + 1) if f"{a / d:.3f}" == r]
        if not ok:
            return None
        ranges.append(range(ok[0], ok[-1] + 1))
    if not sum(x.start for x in ranges) <= accepted <= sum(x.stop - 1 for x in ranges):
        return None
    if all(len(x) == 1 for x in ranges):
        pos = tuple(x.start for x in ranges)
        return (pos, False) if recovery_search.non_increasing(pos) else None
    # Several integers print the same: take the nearest to rate*d, then fix the sum by
    # moving the positions with the most room. Exact sums, approximate split.
    pos_l = [min(max(round(float(r) * d), x.start), x.stop - 1) for r, x in zip(rates_printed, ranges)]
    diff = accepted - sum(pos_l)
    for i, x in enumerate(ranges):
        if diff == 0:
            break
        room = (x.stop - 1 - pos_l[i]) if diff > 0 else (x.start - pos_l[i])
        step = min(diff, room) if diff > 0 else max(diff, room)
        pos_l[i] += step
        diff -= step
    if diff != 0 or not recovery_search.non_increasing(tuple(pos_l)):
        return None
    return tuple(pos_l), True



def reference_recover(accepted, drafted, mean_printed, rates_printed, fixed_length):
    """``recover_counts`` with the reference functions (same control flow)."""
    k = len(rates_printed) if rates_printed else None
    fixed_d = drafted // k if (fixed_length and k and drafted % k == 0) else None
    if accepted == 0 or mean_printed is None or rates_printed is None:
        return None
    candidates = ([fixed_d] if fixed_d is not None
                  else reference_candidate_drafts(accepted, drafted, mean_printed, k or 1))
    fits = [(d, pos) for d in candidates
            if (pos := reference_positions_for(d, accepted, rates_printed)) is not None]
    if len(fits) == 1:
        d, pos = fits[0]
        return recovery.Recovered(d, pos[0], pos[1])
    if fixed_d is not None:
        return recovery.Recovered(fixed_d, None)
    return recovery.Recovered(None, None)


def _printed(drafts, per_pos):
    accepted = sum(per_pos)
    return "%.2f" % (1 + accepted / drafts), [f"{a / drafts:.3f}" for a in per_pos]


def _window(rng, max_drafts):
    k = rng.randint(1, 8)
    drafts = rng.randint(1, max_drafts)
    per_pos, prev = [], drafts
    for _ in range(k):
        prev = rng.randint(prev // 3, prev) if rng.random() < 0.9 else rng.randint(0, drafts)
        per_pos.append(prev)
    return drafts, per_pos


def _check(accepted, drafted, mean, rates, k):
    for fixed in (True, False):
        if accepted > 0:
            want = reference_recover(accepted, drafted, mean, rates, fixed)
            for module in (recovery_search, recovery):
                got = module.recover_counts(accepted, drafted, mean, rates, fixed)
                assert (got.drafts, got.per_position, got.approximate_positions) == (
                    want.drafts, want.per_position, want.approximate_positions), (
                    module.__name__, accepted, drafted, mean, rates, fixed)
    if accepted > 0:
        assert (recovery_search.candidate_drafts(accepted, drafted, mean, k)
                == reference_candidate_drafts(accepted, drafted, mean, k))


def _check_positions(d, accepted, rates):
    want = reference_positions_for(d, accepted, rates)
    assert recovery_search._positions_for(d, accepted, rates) == want, (d, accepted, rates)
    assert recovery.positions_for(d, accepted, rates) == want, (d, accepted, rates)


@pytest.mark.parametrize("seed", range(20))
def test_recovery_matches_the_formatting_reference_on_random_windows(seed):
    rng = random.Random(seed)
    for max_drafts in (50, 999, 3000):
        for _ in range(10):
            drafts, per_pos = _window(rng, max_drafts)
            k = len(per_pos)
            mean, rates = _printed(drafts, per_pos)
            accepted = sum(per_pos)
            drafted = drafts * k + (rng.choice([0, 0, 1, -1, drafts]) if rng.random() < 0.3 else 0)
            drafted = max(drafted, accepted)
            _check(accepted, drafted, mean, rates, k)
            for d in {drafts, drafts - 1, drafts + 1, max(1, drafts // 2), drafts * 3 + 1}:
                if d >= 1:
                    _check_positions(d, accepted, rates)
                    _check_positions(d, accepted + rng.choice([-1, 1]), rates)
            # nudged printed figures: a rate or the mean one unit off, or printed another way
            i = rng.randrange(k)
            bumped = list(rates)
            bumped[i] = "%.3f" % max(0.0, float(bumped[i]) + rng.choice([-0.001, 0.001]))
            _check(accepted, drafted, mean, bumped, k)
            _check_positions(drafts, accepted, bumped)
            _check(accepted, drafted, "%.2f" % (float(mean) + rng.choice([-0.01, 0.01])), rates, k)
            odd = list(rates)
            odd[i] = rng.choice(["nan", "0.12", "0.1234", "01.000", "1.0000", "2.500", "-0.000"])
            _check(accepted, drafted, mean, odd, k)
            _check_positions(drafts, accepted, odd)
            _check(accepted, drafted, rng.choice(["nan", "inf", "1.5", "01.50", "2000.00"]), rates, k)


def test_rates_on_rounding_boundaries():
    # a / d exactly halfway between two thousandths: ties decided by the double's value
    # (0.0625 is exact and rounds to even, "0.062"; 0.0005 is not and lands above or below)
    for d in (16, 32, 80, 400, 1000, 2000, 4000, 6000, 16_000, 400_000):
        for a in sorted({0, 1, 3, d // 16, d // 2, d - 1, d} | {j * d // 2000 for j in range(1, 2000, 97)}):
            if 0 <= a <= d:
                for r in {f"{a / d:.3f}", f"{a / d + 0.001:.3f}", f"{max(0, a / d - 0.001):.3f}"}:
                    _check_positions(d, a, [r])
                    _check_positions(d, a, [r, "0.000"])
    for s in range(0, 2001):
        r = f"{s / 1000:.3f}"
        for d in (2000, 4000, 10_000, 2000 * 7919):
            a = (2 * s + 1) * d // 2000
            for x in (a - 1, a, a + 1):
                if 0 <= x <= d:
                    assert (recovery_search.rate_fits(s, d, r)[0] <= x <= recovery_search.rate_fits(s, d, r)[1]) == (
                        f"{x / d:.3f}" == r)


def test_means_on_rounding_boundaries():
    # 1 + a/d exactly halfway between two hundredths, and rates of 0 and 1
    for a in (1, 2, 3, 7, 50, 199, 1000):
        for c in range(0, 400, 3):
            for den in (2 * c + 1, 2 * c - 1):
                if den > 0 and (200 * a) % den == 0:
                    d = 200 * a // den
                    for mean in ("%.2f" % (1 + a / d), "%.2f" % (1 + a / d + 0.01)):
                        for k in (1, 2, 4):
                            assert (recovery_search.candidate_drafts(a, d * k, mean, k)
                                    == reference_candidate_drafts(a, d * k, mean, k)), (a, d, mean, k)
    for d in (1, 5, 999, 1000, 1001, 123_456):
        for per_pos in ([d], [d, d, d], [d, 0], [0, 0]):
            mean, rates = _printed(d, per_pos)
            _check(sum(per_pos), d * len(per_pos), mean, rates, len(per_pos))
            _check_positions(d, sum(per_pos), rates)


def test_large_draft_counts():
    rng = random.Random(7)
    for d in (10**5, 10**6, 3 * 10**6):
        for _ in range(5):
            per_pos = sorted((rng.randint(0, d) for _ in range(rng.randint(1, 5))), reverse=True)
            mean, rates = _printed(d, per_pos)
            _check_positions(d, sum(per_pos), rates)
            _check_positions(d + 1, sum(per_pos), rates)
            if sum(per_pos):
                assert (recovery.recover_counts(sum(per_pos), d * len(per_pos), mean, rates, True)
                        == reference_recover(sum(per_pos), d * len(per_pos), mean, rates, True))
