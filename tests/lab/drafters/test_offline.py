"""The greedy step walk: what a server counts, given how many leading drafts are right."""

from __future__ import annotations

from specdoctor.lab.drafters.offline import Counts, walk


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


def test_counts_are_vllms_unconditional_per_position_convention():
    c = Counts(3)
    for a in (3, 1, 0, 2):
        c.add(a)
    assert (c.drafts, c.accepted_per_position) == (4, [3, 2, 1])
    assert c.per_position == [0.75, 0.5, 0.25]
    assert c.mean_acceptance_length == 1 + 6 / 4  # counts the bonus token


def test_a_perfect_drafter_at_k4_takes_five_tokens_a_step():
    assert walk([9] * 200, start=0, k=4, max_tokens=64) == [4] * 13  # 1, 6, …, 61 → 66
