"""The verification rules on tiny hand-made distributions, against hand arithmetic and against
a direct Monte Carlo of the algorithm they summarise."""

import numpy as np
import pytest

from specdoctor.oracle import rules

P = np.array([0.5, 0.3, 0.2, 0.0])
Q = np.array([0.2, 0.2, 0.2, 0.4])


def test_expected_acceptance_of_sampled_drafts_is_the_overlap():
    # min(p, q) = 0.2 + 0.2 + 0.2 + 0 = 0.6
    assert rules.expected_acceptance(P, Q) == pytest.approx(0.6)
    assert rules.expected_acceptance(P, P) == pytest.approx(1.0)


def test_the_rules_match_a_monte_carlo_of_speculative_sampling():
    """Speculative sampling run draw by draw (its own arithmetic, not the rules'): a draft
    from q, accepted when u < p/q, else a token from norm(max(p - q, 0)). The rules' acceptance
    probability, law of accepted tokens and residual must match what the draws show, and the
    emitted token must be distributed as p."""
    rng = np.random.default_rng(0)
    n = 200_000
    x = rng.choice(4, size=n, p=Q)
    with np.errstate(divide="ignore"):
        accept = rng.random(n) < np.minimum(1.0, P[x] / Q[x])
    leftover = np.maximum(P - Q, 0)
    fallback = rng.choice(4, size=n, p=leftover / leftover.sum())
    emitted = np.where(accept, x, fallback)
    assert rules.expected_acceptance(P, Q) == pytest.approx(accept.mean(), abs=0.005)
    seen = np.bincount(x[accept], minlength=4) / accept.sum()
    np.testing.assert_allclose(rules.accepted_distribution(P, Q), seen, atol=0.005)
    rejected = np.bincount(fallback[~accept], minlength=4) / (~accept).sum()
    np.testing.assert_allclose(rules.residual(P, Q), rejected, atol=0.01)
    np.testing.assert_allclose(np.bincount(emitted, minlength=4) / n, P, atol=0.005)


def test_the_chain_rule_matches_a_monte_carlo_of_a_k_step_verifier():
    """Three positions with their own (p, q): unconditional rates by the rules (products of
    per-position acceptance) against draws of the verifier, which stops at the first reject."""
    rng = np.random.default_rng(1)
    pairs = [(P, Q), (Q, P), (P, np.array([0.25, 0.25, 0.25, 0.25]))]
    betas = [rules.expected_acceptance(p, q) for p, q in pairs]
    n = 100_000
    alive = np.ones(n, dtype=bool)
    counts = []
    for p, q in pairs:
        x = rng.choice(4, size=n, p=q)
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = rng.random(n) < np.minimum(1.0, np.where(q[x] > 0, p[x] / q[x], 0))
        alive &= ok
        counts.append(alive.mean())
    np.testing.assert_allclose(rules.expected_per_position(betas), counts, atol=0.006)


def test_accepted_law_and_residual_recompose_the_target_exactly():
    # Speculative sampling is exact: beta * law(accepted) + (1 - beta) * residual == p.
    beta = rules.expected_acceptance(P, Q)
    law = rules.accepted_distribution(P, Q)
    res = rules.residual(P, Q)
    np.testing.assert_allclose(beta * law + (1 - beta) * res, P, atol=1e-12)
    np.testing.assert_allclose(law, [1 / 3, 1 / 3, 1 / 3, 0])
    np.testing.assert_allclose(res, [0.75, 0.25, 0, 0])


def test_argmax_draft_accepts_with_the_target_probability_and_stays_exact():
    d = int(np.argmax(Q))  # token 3, which p gives no mass: always rejected
    assert rules.accept_probability_onehot(P, d) == 0.0
    d = 0
    beta = rules.accept_probability_onehot(P, d)
    res = rules.residual(P, token=d)
    np.testing.assert_allclose(res, [0, 0.6, 0.4, 0])
    np.testing.assert_allclose(beta * rules.one_hot(d, 4) + (1 - beta) * res, P)


def test_disjoint_supports_accept_nothing():
    p, q = np.array([1.0, 0, 0]), np.array([0, 0.5, 0.5])
    assert rules.expected_acceptance(p, q) == 0.0
    assert rules.accepted_distribution(p, q) is None
    np.testing.assert_allclose(rules.residual(p, q), p)


def test_per_position_rates_are_unconditional_products():
    np.testing.assert_allclose(rules.expected_per_position([0.8, 0.5, 1.0, 0.0]),
                               [0.8, 0.4, 0.4, 0.0])


def test_realized_acceptance_stops_at_the_first_failure():
    assert rules.realized_accepted([0.9, 0.9, 0.9], [0.1, 0.95, 0.0]) == 1
    assert rules.realized_accepted([1.0, 1.0], [0.999, 0.999]) == 2
    assert rules.realized_accepted([0.0, 1.0], [0.0, 0.0]) == 0


def test_greedy_acceptance_is_the_matching_prefix():
    assert rules.greedy_accepted([5, 6, 7, 8], [5, 6, 9, 8]) == 2
    assert rules.greedy_accepted([5, 6], [5, 6, 1]) == 2
    assert rules.greedy_accepted([1], [2]) == 0


def test_warp_greedy_is_one_hot_on_the_first_maximum():
    np.testing.assert_array_equal(rules.warp(np.array([1.0, 3.0, 3.0]), 0.0), [0, 1, 0])


def test_warp_temperature_and_top_p_by_hand():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    np.testing.assert_allclose(rules.warp(logits, 1.0), [0.5, 0.3, 0.15, 0.05])
    # top_p 0.75: from the bottom, 0.05 and 0.05+0.15=0.2 are <= 0.25 -> dropped.
    np.testing.assert_allclose(rules.warp(logits, 1.0, 0.75), [0.625, 0.375, 0, 0])
    t2 = rules.warp(logits, 2.0)
    assert t2[0] < 0.5 and t2[3] > 0.05 and t2.sum() == pytest.approx(1.0)


def test_warp_matches_vllms_own_top_p_on_random_logits():
    torch = pytest.importorskip("torch")
    try:
        from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch
    except Exception:  # noqa: BLE001 - vLLM absent or not importable here
        pytest.skip("vLLM's sampler ops are not importable")
    rng = np.random.default_rng(3)
    for _ in range(20):
        logits = rng.normal(size=64) * 3
        t, p = float(rng.uniform(0.3, 1.5)), float(rng.uniform(0.5, 0.99))
        x = torch.tensor(logits / t, dtype=torch.float32)[None].clone()
        ref = apply_top_k_top_p_pytorch(x, None, torch.tensor([p])).softmax(-1)[0].double()
        np.testing.assert_allclose(rules.warp(logits, t, p), ref.numpy(), atol=1e-6)


def test_sample_draws_from_the_distribution():
    rng = np.random.default_rng(1)
    draws = np.bincount([rules.sample(P, rng) for _ in range(20_000)], minlength=4) / 20_000
    np.testing.assert_allclose(draws, P, atol=0.015)
    assert draws[3] == 0
