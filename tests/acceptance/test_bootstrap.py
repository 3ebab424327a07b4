"""Bootstrap intervals over requests: they cover the pooled figure and widen with spread."""

import pytest

from specdoctor.acceptance.bootstrap import bootstrap_intervals
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles


def _req(drafts: int, per_pos: tuple[int, ...]) -> AcceptanceProfile:
    return AcceptanceProfile(drafts, drafts * len(per_pos), sum(per_pos), per_pos, len(per_pos))


def test_identical_units_give_a_zero_width_interval():
    units = [_req(10, (10, 10, 10))] * 5
    iv = bootstrap_intervals(units)
    assert iv["mean_acceptance_length"].low == pytest.approx(4.0)
    assert iv["mean_acceptance_length"].high == pytest.approx(4.0)


def test_interval_contains_the_pooled_value_and_reflects_request_spread():
    # Half the requests accept everything, half nothing: per-request clustering.
    units = [_req(10, (10, 10)) for _ in range(10)] + [_req(10, (0, 0)) for _ in range(10)]
    iv = bootstrap_intervals(units, seed=1)
    pooled = sum_profiles(units).per_position[0]
    assert iv["per_position[0]"].low < pooled < iv["per_position[0]"].high
    # A binomial on 200 pooled drafts would give roughly ±0.07; clustering makes it wider.
    assert iv["per_position[0]"].high - iv["per_position[0]"].low > 0.3


def test_no_interval_from_fewer_than_two_units_or_missing_counts():
    assert bootstrap_intervals([_req(10, (5, 2))]) == {}
    assert bootstrap_intervals([_req(10, (5, 2)), AcceptanceProfile(None, 20, 7, None, 2)]) == {}


def test_many_units_are_blocked_and_still_cover():
    units = [_req(5, (i % 5, 0)) for i in range(10_000)]
    iv = bootstrap_intervals(units, max_blocks=500, resamples=500)
    pooled = sum_profiles(units).per_position[0]
    assert iv["per_position[0]"].low <= pooled <= iv["per_position[0]"].high
