"""The CPU probe that says how far the machine's speed moved between two timed runs."""

from __future__ import annotations

import pytest

from specdoctor.bench.probe import cpu_speed, drift


def test_drift_is_the_largest_relative_change():
    assert drift([100.0, 80.0, 120.0]) == pytest.approx(0.5)
    assert drift([100.0, 100.0]) == 0.0
    assert drift([100.0]) == 0.0 and drift([]) == 0.0
    assert drift([0.0, 50.0, 60.0]) == pytest.approx(0.2)   # a failed probe is not a speed


def test_the_probe_measures_the_work_it_is_given():
    fast, slow = cpu_speed(repeats=3, work=20_000), cpu_speed(repeats=3, work=400_000)
    assert fast > 0 and slow > 0 and fast > 4 * slow
