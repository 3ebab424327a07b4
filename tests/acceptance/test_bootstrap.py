"""Bootstrap intervals over requests: they cover the pooled figure and widen with spread."""

import pytest

from specdoctor.acceptance.bootstrap import MIN_UNITS, UnitBlocks, bootstrap_intervals
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles


def _req(drafts: int, per_pos: tuple[int, ...]) -> AcceptanceProfile:
    return AcceptanceProfile(drafts, drafts * len(per_pos), sum(per_pos), per_pos, len(per_pos))


def test_identical_units_give_a_zero_width_interval():
    units = [_req(10, (10, 10, 10))] * MIN_UNITS
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


def test_no_interval_below_the_minimum_number_of_units_and_the_reason_says_so():
    spread = [_req(10, (i % 10, 0)) for i in range(40)]
    assert bootstrap_intervals(spread[: MIN_UNITS - 1]) == {}
    assert bootstrap_intervals(spread[:MIN_UNITS])["acceptance_rate"].high > 0
    blocks = UnitBlocks()
    for u in spread[:2]:
        blocks.add(u)
    reason = blocks.unavailable("windows")
    assert reason is not None and "2 windows" in reason and f"the {MIN_UNITS} from which" in reason
    assert "interval_coverage" in reason
    for u in spread[2:MIN_UNITS]:
        blocks.add(u)
    assert blocks.unavailable("windows") is None and blocks.intervals()


def test_no_interval_when_a_unit_has_no_draft_count():
    units = [_req(10, (5, 2))] * MIN_UNITS + [AcceptanceProfile(None, 20, 7, None, 2)]
    assert bootstrap_intervals(units) == {}
    blocks = UnitBlocks()
    for u in units:
        blocks.add(u)
    assert "no draft count" in (blocks.unavailable("requests") or "")


def test_the_minimum_is_the_one_the_committed_coverage_check_supports():
    """MIN_UNITS is the fewest units from which every simulated case covers >= 90%."""
    import json
    from pathlib import Path

    res = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results"
                      / "interval_coverage.json").read_text())["coverage"]
    ok_from = max(min(n for n in map(int, rows) if all(
        min(rows[str(m)].values()) >= 0.90 for m in map(int, rows) if m >= n)) for rows in res.values())
    assert ok_from == MIN_UNITS


def test_many_units_are_blocked_and_still_cover():
    units = [_req(5, (i % 5, 0)) for i in range(10_000)]
    iv = bootstrap_intervals(units, max_blocks=500, resamples=500)
    pooled = sum_profiles(units).per_position[0]
    assert iv["per_position[0]"].low <= pooled <= iv["per_position[0]"].high


def test_windows_with_a_bounded_draft_count_get_intervals_on_the_bounds():
    """Early vLLM V1 windows (tests/fixtures/vllm/threads/pr15902_v1_early.log's shape: accepted
    and draft tokens printed, the draft count not): the acceptance rate has its usual interval,
    accepted per draft one that holds whatever the counts were."""
    import random

    from specdoctor.acceptance.bootstrap import UnitBlocks
    from specdoctor.acceptance.profile import AcceptanceProfile

    rng = random.Random(1)
    blocks, lows, highs = UnitBlocks(), [], []
    for _ in range(40):
        t = rng.randint(30, 60)
        a = rng.randint(0, t)
        lo, hi = -(-t // 3), t         # k = 3: at least t/3 drafts, at most t
        blocks.add(AcceptanceProfile(None, t, a, k=3, drafts_range=(lo, hi)))
        lows.append((a, hi))
        highs.append((a, lo))
    iv = blocks.intervals()
    assert blocks.unavailable("windows") is None
    low_point = sum(a for a, _ in lows) / sum(d for _, d in lows)
    high_point = sum(a for a, _ in highs) / sum(d for _, d in highs)
    apd = iv["accepted_per_draft"]
    assert apd.low < low_point < high_point < apd.high
    assert apd.method == "bootstrap on the bounds of the draft count"
    assert iv["mean_acceptance_length"].low == pytest.approx(1 + apd.low)
    assert "acceptance_rate" in iv and not any(n.startswith("per_position") for n in iv)
    # a window with no bounds at all still leaves no interval, and says why
    blocks.add(AcceptanceProfile(None, 10, 5))
    assert blocks.intervals() == {}
    assert "no draft count" in blocks.unavailable("windows")
