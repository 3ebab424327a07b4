"""The step simulation with hand-made "models" (logits as functions of the context): exact
step outcomes for greedy, and for sampling the expected per-position rates against the
realized frequencies of the simulated engine."""

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from specdoctor.oracle.simulate import (
    ConfidenceStop, ModelDrafter, NgramDrafter, Sampling, run_request, step_fixed_drafts,
)

V = 5


class FakeLM:
    """Stands in for CachedLM: logits(ids, last) from a function of the context."""

    def __init__(self, fn: Callable[[Sequence[int]], np.ndarray]) -> None:
        self.fn = fn
        self.forwards = 0

    def reset(self) -> None:
        pass

    def logits(self, ids: Sequence[int], last: int = 1) -> np.ndarray:
        self.forwards += 1
        ids = list(ids)
        return np.stack([self.fn(ids[: len(ids) - last + 1 + j]) for j in range(last)])


def peaked(token: int, strength: float = 10.0) -> np.ndarray:
    out = np.zeros(V)
    out[token] = strength
    return out


def counting_target(ids: Sequence[int]) -> np.ndarray:
    return peaked((ids[-1] + 1) % V)  # greedy path: 1, 2, 3, 4, 0, 1, ...


def test_drafter_equal_to_target_accepts_everything():
    t, d = FakeLM(counting_target), FakeLM(counting_target)
    tr = run_request([0], t, ModelDrafter(d, V), 3, 10, Sampling(), np.random.default_rng(0))
    assert tr.output_ids == [1, 2, 3, 4, 0, 1, 2, 3, 4, 0]
    assert [s.accepted for s in tr.steps] == [3, 3, 3]  # 1 + 3*(3+1) = 13 >= 10 tokens
    drafts, dtoks, acc, per = tr.counts(3)
    assert (drafts, dtoks, acc, per) == (3, 9, 9, [3, 3, 3])
    assert tr.rows()[0] == ([], [1])


def test_greedy_steps_follow_the_engine_exactly():
    # The drafter is right except after token 2, where it guesses 0 instead of 3.
    def drafter(ids):
        return peaked(0) if ids[-1] == 2 else counting_target(ids)

    tr = run_request([0], FakeLM(counting_target), ModelDrafter(FakeLM(drafter), V), 3, 8,
                     Sampling(), np.random.default_rng(0))
    # prefill: 1. step 1 after [0,1]: drafts 2,0,1 -> accepts 2, corrects to 3.
    # step 2 after ..3: drafts 4,0,1 -> all accepted + bonus 2. step 3 after ..2: drafts 0,.. -> 0.
    assert [(s.drafts, s.accepted, s.emitted) for s in tr.steps] == [
        ([2, 0, 1], 1, [2, 3]),
        ([4, 0, 1], 3, [4, 0, 1, 2]),
        ([0, 1, 2], 0, [3]),
    ]
    assert tr.output_ids == [1, 2, 3, 4, 0, 1, 2, 3]
    assert tr.counts(3)[3] == [2, 1, 1]
    np.testing.assert_allclose(tr.expected_per_position(3), [2, 1, 1])


def test_ngram_steps_without_a_match_are_plain_decode_steps():
    tr = run_request([1, 2, 3, 4, 0], FakeLM(counting_target), NgramDrafter(2, 4, None), 3, 8,
                     Sampling(), np.random.default_rng(0))
    # After prefill the context ends [.., 0, 1]: no earlier [0, 1]... until the cycle repeats.
    assert tr.output_ids == [1, 2, 3, 4, 0, 1, 2, 3]
    assert all(s.accepted == len(s.drafts) for s in tr.steps)  # prompt lookup on a cycle is right
    rows = tr.rows()
    assert [t for _, out in rows for t in out][: len(tr.output_ids)] == tr.output_ids


def test_the_confidence_stop_reads_the_top_token_among_the_drafters_top_ten():
    # 12 candidates: the top one at logit log(3), the rest at 0. Among all 12 its probability
    # is 3/14 = 0.214; among the top 10 (llama.cpp's draft sampler), 3/12 = 0.25.
    lg = np.zeros(12)
    lg[5] = np.log(3.0)
    assert ConfidenceStop(0.25).confident(lg) and not ConfidenceStop(0.26).confident(lg)
    assert ConfidenceStop(0.0).confident(np.full(12, -np.inf))  # off: every token is drafted
    assert not ConfidenceStop(0.1).confident(np.full(12, -np.inf))


def test_llamacpps_policy_stops_a_draft_at_a_doubt_and_drops_a_short_one():
    # The drafter is sure (strength 10) except after token 3, where its top token has
    # probability 1/5 among its 5 (flat logits): the chain stops before that token.
    def drafter(ids):
        return np.zeros(V) if ids[-1] == 3 else counting_target(ids)

    def run(stop: ConfidenceStop):
        return run_request([0], FakeLM(counting_target),
                           ModelDrafter(FakeLM(drafter), V, stop=stop), 3, 9, Sampling(),
                           np.random.default_rng(0))

    every = run(ConfidenceStop())
    assert [s.drafts for s in every.steps] == [[2, 3, 0], [0, 1, 2], [0, 1, 2]]
    stopped = run(ConfidenceStop(p_min=0.5))
    # [2, 3] then the doubt after 3; after the next 3 the first token is a doubt: no draft
    assert [s.drafts for s in stopped.steps] == [[2, 3], [0, 1, 2]]
    assert stopped.output_ids == every.output_ids == [1, 2, 3, 4, 0, 1, 2, 3, 4]
    # (drafts, draft tokens, accepted): the same text, other counts (1.67 vs 2.5 per draft)
    assert every.counts(3)[:3] == (3, 9, 5) and stopped.counts(3)[:3] == (2, 5, 5)
    # a draft shorter than n_min is dropped: that step is an ordinary decode, counted as no draft
    dropped = run(ConfidenceStop(p_min=0.5, n_min=3))
    assert [s.drafts for s in dropped.steps] == [[0, 1, 2]]
    assert dropped.counts(3)[:3] == (1, 3, 3)
    assert dropped.output_ids == stopped.output_ids


def _fixed(p: np.ndarray) -> Callable[[Sequence[int]], np.ndarray]:
    logp = np.log(np.maximum(p, 1e-300))
    return lambda ids: logp


@pytest.mark.parametrize("mode", ["argmax", "probabilistic"])
def test_sampling_expectations_match_realized_frequencies(mode):
    # Context-free distributions: every position has the same beta, so position i's
    # unconditional rate is beta**(i+1), and the simulated engine must realize it.
    p = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    q = np.array([0.1, 0.5, 0.2, 0.1, 0.1])
    beta = {"argmax": p[1], "probabilistic": np.minimum(p, q).sum()}[mode]
    s = Sampling(1.0, 1.0, mode)
    rng = np.random.default_rng(7)
    k, exp, real, drafts = 3, np.zeros(3), np.zeros(3), 0
    emitted_first = np.zeros(V)
    for r in range(300):
        tr = run_request([0], FakeLM(_fixed(p)), ModelDrafter(FakeLM(_fixed(q)), V), k, 40, s, rng)
        exp += tr.expected_per_position(k)
        real += np.array(tr.counts(k)[3])
        drafts += len(tr.steps)
        for st in tr.steps:
            emitted_first[st.emitted[0]] += 1
    want = beta ** np.arange(1, k + 1)
    np.testing.assert_allclose(exp / drafts, want, rtol=1e-9 if mode == "argmax" else 0.02)
    np.testing.assert_allclose(real / drafts, want, atol=0.02)
    # Exactness of speculative sampling: the first token each step emits is distributed as p.
    np.testing.assert_allclose(emitted_first / emitted_first.sum(), p, atol=0.02)


def test_temperature_and_top_p_reach_the_target_distribution():
    # top_p 0.65 on p = [0.4, 0.3, 0.2, 0.1, 0] keeps {0, 1} (0 + 0.1 + 0.2 <= 0.35 dropped):
    # drafts of 2 can never pass.
    p = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    st = step_fixed_drafts([0], 2, FakeLM(_fixed(p)),
                           ModelDrafter(FakeLM(lambda ids: peaked(2)), V),
                           Sampling(1.0, 0.65), np.random.default_rng(0))
    assert st is not None and st.betas == [0.0, 0.0] and st.accepted == 0
    assert st.emitted[0] in (0, 1)


def test_a_room_at_the_end_shortens_the_last_drafts_as_llama_server_does():
    """With room 1 a draft never runs past the request's end less one token, and a step with
    no room verifies an empty draft, counted as a draft (llama-server's counters); without a
    room every draft is k long to the end (vLLM)."""
    t, d = FakeLM(counting_target), FakeLM(counting_target)
    full = run_request([0], t, ModelDrafter(d, V), 3, 10, Sampling(), np.random.default_rng(0))
    assert [s.drafted for s in full.steps] == [3, 3, 3]
    roomy = run_request([0], t, ModelDrafter(d, V), 3, 10, Sampling(), np.random.default_rng(0),
                        room=1)
    # 1 from the prefill; 1+4 = 5; 5+4 = 9; one token left: an empty draft, then 10
    assert [s.drafted for s in roomy.steps] == [3, 3, 0]
    assert roomy.output_ids == full.output_ids
    assert roomy.counts(3)[:3] == (3, 6, 6)
    short = run_request([0], t, ModelDrafter(d, V), 3, 8, Sampling(), np.random.default_rng(0),
                        room=1)
    # 1; 1+4 = 5; three left: a draft of 2, all accepted, and the bonus token: 8
    assert [s.drafted for s in short.steps] == [3, 2]
