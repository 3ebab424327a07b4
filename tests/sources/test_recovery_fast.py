"""The draft-count recovery by arithmetic (``sources.recovery``, what the readers call) against
the search it replaces (``sources.recovery_search``, every candidate count tried in turn): the
same result, field for field, on many generated windows: exact counts, ranges of counts,
approximate per-position splits, and the figures that pin nothing down.

Windows are drawn the way servers print them (fixed and variable-length drafts, small and huge
draft counts, k = 1..8, llama.cpp's unknown k), then perturbed the way logs disagree with
themselves (a rate or the mean one unit off, a draft-token count that is not k per draft,
rates printed another way)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from specdoctor.sources import recovery, recovery_search


def _printed(drafts: int, per_pos: list[int]) -> tuple[str, list[str]]:
    """The mean acceptance length and per-position rates as vLLM prints them."""
    return f"{1 + sum(per_pos) / drafts:.2f}", [f"{a / drafts:.3f}" for a in per_pos]


def _per_position(rng: random.Random, drafts: int, k: int) -> list[int]:
    """Accepted counts per position, prefix-closed (each at most the one before)."""
    kind = rng.random()
    if kind < 0.05:
        return [0] * k
    if kind < 0.10:
        return [drafts] * k  # everything accepted: rates 1.000
    out, prev = [], drafts
    for _ in range(k):
        prev = rng.randint(prev // 3, prev) if rng.random() < 0.8 else rng.randint(0, prev)
        out.append(prev)
    return out


def _window(rng: random.Random, k_max: int) -> tuple[int, int, list[int], str, list[str]]:
    """k, the draft count, per-position counts and the mean and rates printed for them."""
    k = rng.randint(1, k_max)
    drafts = _drafts(rng)
    per_pos = _per_position(rng, drafts, k)
    return (k, drafts, per_pos, *_printed(drafts, per_pos))


def _drafts(rng: random.Random) -> int:
    if rng.random() < 0.015:
        return rng.randint(10**5, 10**7)  # huge windows (the search takes ~0.1 s on each)
    return rng.choice([rng.randint(1, 12), rng.randint(1, 200), rng.randint(200, 999),
                       rng.randint(990, 1010), rng.randint(1000, 20_000)])


def _drafted(rng: random.Random, drafts: int, per_pos: list[int], k: int) -> int:
    accepted = sum(per_pos)
    r = rng.random()
    if r < 0.4:
        return drafts * k  # fixed length
    if r < 0.8:  # variable length: each draft carries its accepted prefix, plus the rejected one
        least = accepted + drafts - (per_pos[-1] if per_pos else 0)
        return rng.randint(max(least, 1), max(least, drafts * k))
    return max(accepted, drafts * k + rng.choice([-1, 1, drafts, -drafts // 2]))  # inconsistent


def _same(accepted, drafted, mean, rates, fixed, k=-1) -> recovery.Recovered:
    want = recovery_search.recover_counts(accepted, drafted, mean, rates, fixed, k)
    got = recovery.recover_counts(accepted, drafted, mean, rates, fixed, k)
    assert got == want, (accepted, drafted, mean, rates, fixed, k)
    return got


def _kind(rec: recovery.Recovered) -> str:
    if rec.drafts is not None:
        return "exact, approximate positions" if rec.approximate_positions else "exact"
    return "range" if rec.drafts_range is not None else "not recoverable"


@pytest.mark.parametrize("seed", range(4))
def test_arithmetic_matches_the_search_on_generated_windows(seed):
    rng = random.Random(seed)
    seen: Counter[str] = Counter()
    for _ in range(200):
        k, drafts, per_pos, mean, rates = _window(rng, 8)
        accepted = sum(per_pos)
        drafted = _drafted(rng, drafts, per_pos, k)
        for fixed in (True, False, None):
            seen[_kind(_same(accepted, drafted, mean, rates, fixed))] += 1
        _same(accepted, drafted, mean, None, False, k)  # no per-position rates logged
        _same(accepted, drafted, mean, rates, None, None)  # llama.cpp: k unknown
        _same(accepted, drafted, None, rates, False)  # no mean
        if drafts > 20_000:
            continue  # figures that fit no count: the search tries every candidate, for seconds
        # the printed figures disagreeing with each other, or printed another way
        i = rng.randrange(k)
        bumped = list(rates)
        bumped[i] = f"{max(0.0, float(bumped[i]) + rng.choice([-0.001, 0.001])):.3f}"
        _same(accepted, drafted, mean, bumped, False)
        _same(accepted, drafted, f"{float(mean) + rng.choice([-0.01, 0.01]):.2f}", rates, False)
        odd = list(rates)
        odd[i] = rng.choice(["nan", "0.12", "0.1234", "01.000", "2.001", "-0.000", "١.000"])
        _same(accepted, drafted, mean, odd, False)
        _same(accepted, drafted, rng.choice(["nan", "inf", "1.5", "01.50", "2000.00", ""]), rates,
              False)
        _same(accepted + rng.choice([-1, 1]), drafted, mean, rates, False)
        _same(accepted, drafted, mean, rates[:-1] or rates, False)
    # the comparison covered every kind of result, not only the easy one
    assert min(seen[kind] for kind in ("exact", "exact, approximate positions", "range",
                                       "not recoverable")) >= 5, seen


def test_edge_windows():
    cases = [
        (0, 30, "1.00", ["0.000"] * 3),  # nothing accepted
        (0, 0, "nan", ["nan"] * 3),  # nothing drafted
        (30, 30, "2.00", ["1.000"]),  # k = 1, everything accepted
        (10, 30, "2.00", ["1.000"]),  # k = 1
        (7, 7, "2.00", ["1.000"]),
        (1, 10**7, "1.00", ["0.000"] * 5),  # one accepted of ten million drafted
        (3 * (2**31 - 3), 3 * (2**31 - 3), "2.00", ["1.000"] * 3),  # past the exact shortcuts
        (2**31 - 1, 2**31 - 1, "2.00", ["1.000"]),
        (999, 999 * 2, "2.00", ["1.000", "0.000"]),
        (1000, 1000 * 2, "2.00", ["1.000", "0.000"]),
        (1001, 1001 * 2, "2.00", ["1.000", "0.000"]),
        (5, 50, "1.50", ["0.500"]),
        (21, 57, "2.00", ["0.667", "0.238", "0.095"]),  # the documented example
        (21, 57, "2.00", []),
    ]
    for accepted, drafted, mean, rates in cases:
        for fixed in (True, False, None):
            _same(accepted, drafted, mean, rates, fixed)
            _same(accepted, drafted, mean, None, fixed)
        _same(accepted, drafted, mean, rates, None, None)
    assert recovery.recover_counts(21, 57, "2.00", ["0.667", "0.238", "0.095"], False) == \
        recovery.Recovered(21, (14, 5, 2))
    assert recovery.recover_counts(30, 30, "2.00", ["1.000"], False).drafts == 30  # k = 1


def test_rates_on_rounding_boundaries():
    # a_i / D exactly on a rounding boundary of the third decimal (D a multiple of 2000 / gcd):
    # there formatting, not arithmetic, decides which side the count falls
    rng = random.Random(5)
    for _ in range(300):
        k = rng.randint(1, 4)
        drafts = rng.choice([16, 80, 400, 2000, 4000, 6000, 16_000, 400_000]) * rng.randint(1, 3)
        per_pos = sorted(((2 * rng.randint(0, 999) + 1) * drafts // 2000 for _ in range(k)),
                         reverse=True)
        mean, rates = _printed(drafts, per_pos)
        accepted = sum(per_pos)
        for drafted in (drafts * k, accepted + drafts, max(accepted, drafts)):
            for fixed in (True, False):
                _same(accepted, drafted, mean, rates, fixed)


@pytest.mark.parametrize("seed", range(3))
def test_positions_for_a_known_count(seed):
    rng = random.Random(seed)
    for _ in range(400):
        _, drafts, per_pos, _, rates = _window(rng, 6)
        accepted = sum(per_pos)
        for d in {drafts, drafts - 1, drafts + 1, max(1, drafts // 2), 2 * drafts + 1, 0}:
            for a in (accepted, accepted + rng.choice([-1, 1])):
                assert (recovery.positions_for(d, a, rates)
                        == recovery_search.positions_for(d, a, rates)), (d, a, rates)
