"""The greedy step walk, and the lab's offline prediction as the oracle's AcceptanceProfile."""

from __future__ import annotations

import pytest

from specdoctor.lab.drafters.offline import walk


def test_every_step_accepts_its_run_and_produces_one_more():
    runs = [1] * 100
    steps = walk(runs, start=9, k=3, max_tokens=64)
    # the prefill made token 1; each step then makes 2 (one accepted + the bonus): 1, 3, …, 63
    assert steps == [1] * 32


def test_runs_are_capped_at_k_and_read_at_the_step_starts():
    runs = [0] * 20
    runs[4], runs[5], runs[9] = 7, 2, 1  # start 4 accepts min(7, 3) = 3 → next start 8
    # produced: 1 → 5 (p 8) → 6 (p 9) → 8 (p 11) → 9 (p 12) → 10
    assert walk(runs, start=4, k=3, max_tokens=10) == [3, 0, 1, 0, 0]


def test_a_perfect_drafter_at_k4_takes_five_tokens_a_step():
    assert walk([9] * 200, start=0, k=4, max_tokens=64) == [4] * 13  # 1, 6, …, 61 → 66


@pytest.mark.parametrize(("max_tokens", "drafts", "mal"), [(1, 0, None), (16, 2 * 5, 3.0)])
def test_prediction_is_a_profile_with_the_bonus_token_counted(max_tokens, drafts, mal):
    """The perfect EAGLE3 control accepts both drafts at k=2, so each step makes 3 tokens
    (1, 4, …, 13 → 16: five steps a request) and the mean acceptance length is 1 + 2; with one
    token asked there is no step at all: no mean, never a 0."""
    pytest.importorskip("torch")
    from specdoctor.acceptance.profile import AcceptanceProfile
    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import offline

    target, draft = drafters.module("eagle3").control("perfect")
    p = offline.predict("eagle3", target, draft, take("code", 2), 2, max_tokens)
    assert isinstance(p, AcceptanceProfile)
    assert p.drafts == drafts
    assert p.mean_acceptance_length == mal
    if drafts:
        assert list(p.accepted_per_position) == [drafts, drafts]
