"""The gate's test and its multiple-comparison control, on numbers worked by hand.

Each check here fails when the comparison is broken in the ways a gate breaks: a one-sided
test, overlap of intervals as the criterion, Holm dropped or replaced by no correction, a
regression called on significance alone (without the allowed drop), or on a rise.
"""

from __future__ import annotations

import math

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench.stats import Spread
from specdoctor.gate.compare import (
    DROP_ALLOWED, IMPROVED, NOISE, RARE, REGRESSED, UNTESTED, CellSample, Estimate, compare, holm,
    mover_p, speedup_estimate,
)


def test_the_test_is_two_sided():
    # symmetric intervals, half-width 0.1 each: se = hypot(0.1, 0.1) / 1.96, z = 0.13 / se
    b, c = Estimate(1.0, 0.9, 1.1), Estimate(0.87, 0.77, 0.97)
    z = 0.13 / (math.hypot(0.1, 0.1) / 1.959963984540054)
    assert mover_p(b, c) == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert 0.05 < mover_p(b, c) < 0.1  # a one-sided test would give half: below 0.05
    assert mover_p(b, c) == pytest.approx(mover_p(c, b))  # a rise is tested like a drop


def test_overlapping_intervals_can_still_differ_significantly():
    b, c = Estimate(1.0, 0.9, 1.1), Estimate(0.85, 0.75, 0.95)
    assert c.high > b.low  # the intervals overlap
    assert mover_p(b, c) < 0.05


def test_the_half_intervals_that_face_each_other_count():
    # a drop: the baseline's lower half (tiny) and the candidate's upper half (tiny) face each
    # other; their far halves (wide) do not matter
    b, c = Estimate(1.0, 0.99, 1.5), Estimate(0.9, 0.4, 0.91)
    assert mover_p(b, c) < 1e-6
    wide = Estimate(1.0, 0.5, 1.01), Estimate(0.9, 0.89, 1.4)
    assert mover_p(*wide) > 0.5


def test_equal_values_and_zero_width_intervals():
    assert mover_p(Estimate(2.0, 1.5, 2.5), Estimate(2.0, 1.9, 2.1)) == 1.0
    assert mover_p(Estimate(1.0, 1.0, 1.0), Estimate(0.5, 0.5, 0.5)) == 0.0


def test_holm_steps_down_and_stops():
    rejected = [r for r, _ in holm([0.01, 0.02, 0.03, 0.04], 0.05)]
    # 0.01 <= 0.05/4; 0.02 > 0.05/3: Holm stops there (uncorrected, all four would pass 0.05)
    assert rejected == [True, False, False, False]
    levels = [lv for _, lv in holm([0.04, 0.001, 0.03], 0.05)]
    assert levels == pytest.approx([0.05, 0.05 / 3, 0.05 / 2])
    assert [r for r, _ in holm([0.012, 0.001, 0.024], 0.05)] == [True, True, True]


def _units(rates: list[tuple[int, int]], k: int = 2, reps: int = 16) -> tuple:
    # each request: 10 drafts of k tokens, accepting a0 at position 0 and a1 at position 1
    return tuple(AcceptanceProfile(10, 10 * k, a0 + a1, (a0, a1), k)
                 for i in range(reps) for a0, a1 in [rates[i % len(rates)]])


def _cell(name: str, rates: list[tuple[int, int]], **kw) -> CellSample:
    units = _units(rates)
    return CellSample(name, 2, units, None, **kw)


def test_regression_needs_significance_and_a_drop_beyond_the_allowed():
    base = [_cell("a", [(8, 6), (9, 7), (7, 5), (8, 6)])]
    big = [_cell("a", [(4, 2), (5, 3), (3, 1), (4, 2)])]
    cmp = compare(base, big)
    assert not cmp.passed
    assert {t.figure for t in cmp.regressions} == {"mean_acceptance_length", "per_position[0]",
                                                    "per_position[1]"}
    # the same drops (−33%, −50%, −67%), significant, but allowed by --max-drop 70%
    lenient = compare(base, big, max_drop=0.7)
    assert lenient.passed
    assert {t.outcome for t in lenient.tests} == {DROP_ALLOWED}
    # a rise is never a regression
    up = compare(big, base)
    assert up.passed and {t.outcome for t in up.tests} == {IMPROVED}


def test_a_change_inside_the_noise_passes():
    base = [_cell("a", [(9, 8), (2, 1), (6, 3), (10, 9)])]
    near = [_cell("a", [(9, 7), (2, 1), (6, 3), (9, 9)])]
    cmp = compare(base, near)
    assert cmp.passed and {t.outcome for t in cmp.tests} == {NOISE}
    assert all(t.p is not None and t.p > 0.05 for t in cmp.tests)


def test_missing_intervals_and_k_changes_are_not_passed_silently():
    few = CellSample("a", 2, _units([(8, 6)], reps=4), None)  # 4 requests: no interval
    cmp = compare([_cell("a", [(8, 6), (7, 5)])], [few])
    assert {t.outcome for t in cmp.tests} == {UNTESTED}
    assert {t.lacking for t in cmp.tests} == {"candidate"}
    k3 = CellSample("a", 3, _units([(8, 6)]), None)
    assert compare([_cell("a", [(8, 6)])], [k3]).mismatches == ["a: k 2 → 3"]
    assert compare([_cell("a", [(8, 6)]), _cell("b", [(8, 6)])],
                   [_cell("a", [(8, 6)])]).missing == ["b"]


def test_speedup_is_tested_on_the_log_scale_where_the_baseline_has_spec_off():
    spec, off = Spread(200.0, 180.0, 220.0, "requests"), Spread(100.0, 95.0, 105.0, "requests")
    e = speedup_estimate(spec, off)
    assert e is not None and e.value == pytest.approx(2.0) and e.low < 2.0 < e.high
    assert speedup_estimate(spec, Spread(100.0, 100.0, 100.0, "none")).has_interval is False
    rates = [(8, 6), (7, 5)]
    base = [_cell("a", rates, tok_s=spec, spec_off_tok_s=off)]
    slow = [_cell("a", rates, tok_s=Spread(120.0, 110.0, 130.0, "requests"), spec_off_tok_s=off)]
    cmp = compare(base, slow)
    (t,) = [t for t in cmp.tests if t.figure == "speedup"]
    assert t.outcome == REGRESSED and t.change == pytest.approx(-0.4)
    assert "speedup" not in {t.figure for t in compare(base, slow, speed=False).tests}
    # no spec-off in the baseline: speed is not a figure of the gate
    assert "speedup" not in {t.figure for t in compare([_cell("a", rates)], slow).tests}


def test_rare_positions_are_reported_not_gated():
    # position 1 accepted in 1 of 100 drafts: a sample without a single event there has a
    # zero-width interval, so it would read as a significant drop; it is reported only
    base = [_cell("a", [(8, 1), (7, 1), (9, 1), (8, 1)] + [(8, 0)] * 12)]
    cand = [_cell("a", [(8, 0)])]
    cmp = compare(base, cand)
    (pos1,) = [t for t in cmp.tests if t.figure == "per_position[1]"]
    assert pos1.base.value < 0.05 and pos1.cand.value == 0
    assert pos1.outcome == RARE and pos1.p is None and cmp.passed
