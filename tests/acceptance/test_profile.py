"""AcceptanceProfile conventions: each derived figure from its counters, by definition."""

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile, difference, sum_profiles


def test_derived_figures_follow_their_conventions():
    # 10 drafts of k=3; positions accepted 8, 5, 2 times → 15 accepted tokens.
    p = AcceptanceProfile(drafts=10, draft_tokens=30, accepted_tokens=15,
                          accepted_per_position=(8, 5, 2), k=3)
    assert p.mean_acceptance_length == pytest.approx(2.5)  # bonus counted
    assert p.accepted_per_draft == pytest.approx(1.5)  # bonus not counted
    assert p.acceptance_rate == pytest.approx(0.5)
    assert p.per_position == pytest.approx([0.8, 0.5, 0.2])
    assert p.per_position_conditional == pytest.approx([0.8, 5 / 8, 2 / 5])


def test_case_a_reading_is_accepted_per_draft_not_mean_length():
    # Case A: 0.75 tokens/step with pos0≈0.5, pos1≈0.25, pos2≈0 is the bonus-free figure.
    p = AcceptanceProfile(drafts=100, draft_tokens=800, accepted_tokens=75,
                          accepted_per_position=(50, 25, 0, 0, 0, 0, 0, 0), k=8)
    assert p.accepted_per_draft == pytest.approx(0.75)
    assert p.mean_acceptance_length == pytest.approx(1.75)
    assert p.per_position_conditional[2] == 0.0
    assert p.per_position_conditional[3] is None  # never reached


def test_sum_adds_counts_never_averages():
    a = AcceptanceProfile(1, 4, 4, (1, 1, 1, 1), 4)
    b = AcceptanceProfile(99, 396, 0, (0, 0, 0, 0), 4)
    total = sum_profiles([a, b])
    assert total.drafts == 100 and total.accepted_tokens == 4
    assert total.per_position == pytest.approx([0.01] * 4)
    # the mean of the two windows' rates would be 0.5: a different, wrong answer
    assert total.acceptance_rate == pytest.approx(4 / 400)


def test_unknown_counter_stays_unknown_in_a_sum():
    total = sum_profiles([AcceptanceProfile(None, 6, 0, None, 3), AcceptanceProfile(2, 6, 3, (2, 1, 0), 3)])
    assert total.drafts is None
    assert total.mean_acceptance_length is None
    assert total.draft_tokens == 12 and total.acceptance_rate == pytest.approx(0.25)


def test_rate_only_windows_are_flagged_unweighted():
    w1 = AcceptanceProfile(None, None, None, reported_mean_acceptance_length=2.0, count_weighted=False)
    w2 = AcceptanceProfile(None, None, None, reported_mean_acceptance_length=3.0, count_weighted=False)
    total = sum_profiles([w1, w2])
    assert total.count_weighted is False
    assert total.mean_acceptance_length == pytest.approx(2.5)
    assert total.to_json()["count_weighted"] is False


def test_difference_refuses_a_counter_that_went_down():
    before = AcceptanceProfile(10, 40, 30, (10, 10, 5, 5), 4)
    after = AcceptanceProfile(4, 16, 16, (4, 4, 4, 4), 4)
    with pytest.raises(ValueError, match="restart"):
        difference(after, before)
    d = difference(AcceptanceProfile(15, 60, 40, (15, 12, 8, 5), 4), before)
    assert (d.drafts, d.draft_tokens, d.accepted_tokens, d.accepted_per_position) == (5, 20, 10, (5, 2, 3, 0))


def test_json_names_every_convention():
    j = AcceptanceProfile(4, 16, 8, (4, 2, 1, 1), 4).to_json()
    for key in ("drafts", "draft_tokens", "accepted_tokens", "per_position", "mean_acceptance_length",
                "accepted_per_draft", "acceptance_rate"):
        assert key in j
    assert j["mean_acceptance_length"] == 3.0 and j["accepted_per_draft"] == 2.0
