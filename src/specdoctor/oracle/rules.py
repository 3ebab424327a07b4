"""The verification rules a correct engine applies, as pure functions over numpy arrays.

Everything here is exact arithmetic on distributions; nothing loads a model. Conventions:

- ``p``: the target's next-token distribution after the engine's sampling transforms
  (temperature, then top-p), the one the verifier samples from;
- ``q``: the drafter's distribution (only for drafts *sampled* from the drafter; drafts taken by
  argmax, and n-gram drafts, have no q: they are one token, treated as a one-hot q);
- ``beta[j]``: the probability that draft position j is accepted given positions < j were.
  Per-position rates are unconditional, so the expected acceptance at position i of one step
  is ``prod(beta[:i+1])``.

The rule (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding";
vLLM's rejection sampler follows it): accept draft token x with probability min(1, p(x)/q(x));
on rejection emit a token from norm(max(p - q, 0)); if all k are accepted, emit a bonus token
from the next p. Then every emitted token is distributed exactly as p. For a one-hot q the
acceptance probability is p(x) and the residual is p with x removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

GREEDY = 0.0


def warp(logits: np.ndarray, temperature: float, top_p: float = 1.0) -> np.ndarray:
    """The distribution the engine samples from: softmax(logits / T) restricted to top-p.

    Temperature 0 means greedy: a one-hot on the first argmax (how torch and numpy break ties).
    Top-p follows vLLM's ``apply_top_k_top_p_pytorch``: sort ascending, drop the tokens whose
    cumulative probability from the bottom is <= 1 - top_p, always keep the most likely one.
    """
    logits = np.asarray(logits, dtype=np.float64)
    if temperature <= GREEDY:
        out = np.zeros_like(logits)
        out[int(np.argmax(logits))] = 1.0
        return out
    z = logits / temperature
    probs = _softmax(z)
    if top_p < 1.0:
        order = np.argsort(z, kind="stable")  # ascending, like torch.sort(descending=False)
        cum = np.cumsum(probs[order])
        drop = cum <= 1.0 - top_p
        drop[-1] = False
        z = z.copy()
        z[order[drop]] = -np.inf
        probs = _softmax(z)
    return probs


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - np.max(z))
    return e / e.sum()


def one_hot(token: int, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.float64)
    out[token] = 1.0
    return out


def greedy_accepted(drafts: Sequence[int], target_argmax: Sequence[int]) -> int:
    """Accepted count under greedy verification: the length of the prefix where each draft
    token equals the target's argmax at that position."""
    n = 0
    for d, t in zip(drafts, target_argmax):
        if d != t:
            break
        n += 1
    return n


def accept_probability_onehot(p: np.ndarray, token: int) -> float:
    """beta for a draft token with no q (argmax or n-gram draft): p(token)."""
    return float(p[token])


def expected_acceptance(p: np.ndarray, q: np.ndarray) -> float:
    """beta for a draft token sampled from q, averaged over that token: sum_x min(p(x), q(x))."""
    return float(np.minimum(p, q).sum())


def accepted_distribution(p: np.ndarray, q: np.ndarray) -> np.ndarray | None:
    """The law of a sampled draft token given that it was accepted: min(p, q) / beta.
    None when beta is 0 (p and q share no support: nothing can be accepted)."""
    m = np.minimum(p, q)
    s = m.sum()
    return None if s <= 0 else m / s


def residual(p: np.ndarray, q: np.ndarray | None = None, token: int | None = None
             ) -> np.ndarray:
    """The law of the token emitted on rejection: norm(max(p - q, 0)).

    With ``token`` instead of ``q`` (one-hot draft), p with that token removed. If nothing is
    left (p was itself one-hot on the draft, so rejection had probability 0), returns p.
    """
    if q is None:
        if token is None:
            raise ValueError("residual needs q or token")
        r = p.copy()
        r[token] = 0.0
    else:
        r = np.maximum(p - q, 0.0)
    s = r.sum()
    return p if s <= 0 else r / s


def expected_per_position(betas: Sequence[float]) -> np.ndarray:
    """Unconditional expected acceptance at each position of one step: cumulative products."""
    return np.cumprod(np.asarray(betas, dtype=np.float64))


def realized_accepted(betas: Sequence[float], uniforms: Sequence[float]) -> int:
    """How many positions one simulated step accepts: position j passes when u_j < beta_j
    (vLLM: ``target_prob / draft_prob >= uniform``; with beta 1 a position always passes)."""
    n = 0
    for b, u in zip(betas, uniforms):
        if not (u < b or b >= 1.0):
            break
        n += 1
    return n


def sample(probs: np.ndarray, rng: np.random.Generator) -> int:
    """One token from a distribution (inverse CDF on one uniform; exact for any support)."""
    c = np.cumsum(probs)
    u = rng.random() * c[-1]
    return int(min(np.searchsorted(c, u, side="right"), len(probs) - 1))
