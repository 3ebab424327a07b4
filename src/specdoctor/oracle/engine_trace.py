"""The engine's own draft tokens, captured, and set against the oracle token by token.

vLLM's per-request spec-decode metrics (``--per-request-spec-decode-metrics detailed``) carry
how many drafts each step accepted, not which tokens were drafted. The ``draft-trace`` probe
pack (``packs/draft_trace/``, a ``sitecustomize`` put on PYTHONPATH) records, per verify
step, the draft ids the scheduler sent and the tokens the step emitted. ``hook_env`` gives the
environment that turns it on; ``read`` parses its log; ``agreement`` walks engine and oracle
side by side.

``agreement`` is greedy only: a sampled trajectory is random, so the oracle's own run is
compared with it by profile, not by token. ``replay`` works for both: it re-scores the engine's
own steps (its contexts, its drafts) with the oracle's models, every method
(``load_replay_models``), and keeps each step for the decision (``experiments/replay``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.oracle.simulate import RequestTrace
from specdoctor.packs import draft_trace

HOOK_DIR = Path(draft_trace.__file__).resolve().parent
LOG_ENV = "SPECDOCTOR_DRAFT_LOG"


def hook_env(log_path: Path) -> dict[str, str]:
    """Environment additions that make a vLLM server record its drafts into ``log_path``."""
    current = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": str(HOOK_DIR) + (os.pathsep + current if current else ""),
            LOG_ENV: str(log_path)}


@dataclass
class EngineRequest:
    req_id: str
    prompt_ids: list[int]
    rows: list[tuple[list[int], list[int]]] = field(default_factory=list)  # (draft, emitted)

    @property
    def output_ids(self) -> list[int]:
        return [t for _, out in self.rows for t in out]


def read(log_path: Path) -> list[EngineRequest]:
    """Requests in order of first appearance; rows in step order."""
    reqs: dict[str, EngineRequest] = {}
    errors: list[str] = []
    for line in log_path.read_text().splitlines():
        if not line.strip():
            continue
        # the draft-trace probe pack writes "[probe] draft-trace {row}"
        row: dict[str, Any] = json.loads(line.split(" ", 2)[2] if line.startswith("[probe]")
                                         else line)
        if "error" in row:
            errors.append(str(row["error"]))
            continue
        r = reqs.get(row["req"])
        if r is None:
            r = reqs[row["req"]] = EngineRequest(row["req"], list(row.get("prompt") or []))
        r.rows.append((list(row["draft"]), list(row["out"])))
    if errors:
        raise RuntimeError(f"the draft hook failed inside the engine: {errors[0]}")
    return list(reqs.values())


@dataclass
class Divergence:
    prompt_index: int
    step: int                  # row index (0 = prefill)
    output_position: int       # index in the output of the first differing token
    what: str                  # "draft" or "emitted"
    engine: list[int]
    oracle: list[int]
    target_margin: float | None  # oracle's top1 - top2 target logit there (greedy)
    draft_margin: float | None

    def to_json(self) -> dict[str, Any]:
        return self.__dict__


@dataclass
class TokenAgreement:
    requests: int = 0
    unmatched_engine_requests: int = 0
    steps_compared: int = 0
    draft_tokens_compared: int = 0
    draft_tokens_equal: int = 0
    emitted_tokens_compared: int = 0
    emitted_tokens_equal: int = 0
    steps_same_accepted: int = 0
    identical_requests: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["divergences"] = [x.to_json() for x in self.divergences]
        return d


def agreement(engine: Sequence[EngineRequest], traces: Sequence[RequestTrace]) -> TokenAgreement:
    """Compare step by step until the first difference in each request (after it, the two
    trajectories no longer share a context, so later steps say nothing)."""
    by_prompt: dict[tuple[int, ...], RequestTrace] = {}
    for t in traces:
        by_prompt.setdefault(tuple(t.prompt_ids), t)
    out = TokenAgreement()
    for e in engine:
        t = by_prompt.get(tuple(e.prompt_ids))
        if t is None:
            out.unmatched_engine_requests += 1
            continue
        out.requests += 1
        div = _walk(e, t, out)
        if div is None:
            out.identical_requests += 1
        else:
            out.divergences.append(div)
    return out


def _walk(e: EngineRequest, t: RequestTrace, acc: TokenAgreement) -> Divergence | None:
    oracle_rows = t.rows()
    steps_by_pos = {s.position: s for s in t.steps}
    pos = 0
    for i, ((ed, eo), (od, oo)) in enumerate(zip(e.rows, oracle_rows)):
        acc.steps_compared += 1
        acc.draft_tokens_compared += max(len(ed), len(od))
        acc.draft_tokens_equal += sum(1 for a, b in zip(ed, od) if a == b)
        acc.emitted_tokens_compared += max(len(eo), len(oo))
        acc.emitted_tokens_equal += sum(1 for a, b in zip(eo, oo) if a == b)
        if len(eo) == len(oo):
            acc.steps_same_accepted += 1
        if ed != od or eo != oo:
            what = "draft" if ed != od else "emitted"
            s = steps_by_pos.get(pos)
            j = _first_diff(ed, od) if what == "draft" else _first_diff(eo, oo)
            tm = s.target_margin[j] if s and j < len(s.target_margin) else None
            dm = s.draft_margin[j] if s and j < len(s.draft_margin) else None
            return Divergence(t.prompt_index, i, pos + (j if what == "emitted" else 0), what,
                              ed if what == "draft" else eo, od if what == "draft" else oo, tm, dm)
        pos += len(eo)
    if len(e.rows) != len(oracle_rows):  # one side has steps the other never took
        return Divergence(t.prompt_index, min(len(e.rows), len(oracle_rows)), pos, "length",
                          [], [], None, None)
    return None


@dataclass
class ReplayStep:
    """One engine step re-scored: what the engine drafted and accepted, what the drafter
    proposes on the same context, and what a correct verifier accepts."""

    request: int                 # index of the engine request (order of first appearance)
    row: int                     # the engine's row in that request (0 is the prefill)
    drafts: list[int]            # the engine's drafts (empty: it drafted nothing this step)
    chain: list[int] | None      # the drafter's own proposal there; None: not comparable
    chain_margins: list[float]   # the drafter's top1 - top2 logit at each chain position
    betas: list[float]           # P(position j accepted | j - 1 were), engine's drafts
    chain_betas: list[float] | None  # the same for the drafter's chain (None: equal drafts,
    #                                  or neither drafted; empty: the drafter proposes nothing)
    accepted: int                # what the engine accepted (its emitted tokens minus one)
    target_margins: list[float]  # the target's top1 - top2 logit at each draft position

    def first_mismatch(self) -> int | None:
        """Position of the first draft that is not the drafter's own (None: all equal, or a
        chain that cannot be compared)."""
        if self.chain is None:
            return None
        for j, (a, b) in enumerate(zip(self.drafts, self.chain)):
            if a != b:
                return j
        return None if len(self.drafts) == len(self.chain) else min(len(self.drafts),
                                                                     len(self.chain))

    def to_json(self) -> dict[str, Any]:
        return {"request": self.request, "row": self.row, "drafts": self.drafts,
                "chain": self.chain, "chain_margins": [round(x, 5) for x in self.chain_margins],
                "betas": [round(x, 6) for x in self.betas],
                "chain_betas": None if self.chain_betas is None
                else [round(x, 6) for x in self.chain_betas],
                "accepted": self.accepted,
                "target_margins": [round(x, 5) for x in self.target_margins]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> ReplayStep:
        return ReplayStep(int(d["request"]), int(d["row"]), list(d["drafts"]),
                          None if d.get("chain") is None else list(d["chain"]),
                          [float(x) for x in d.get("chain_margins") or []],
                          [float(x) for x in d["betas"]],
                          None if d.get("chain_betas") is None
                          else [float(x) for x in d["chain_betas"]],
                          int(d["accepted"]), [float(x) for x in d.get("target_margins") or []])


@dataclass
class Replay:
    """The engine's own steps re-scored by the oracle's models (teacher-forced on the engine's
    contexts). Works for sampled runs too: it asks, step by step, whether the drafts the engine
    verified are the drafts a correct drafter proposes there, and how many positions a correct
    verifier accepts in expectation, beside how many the engine accepted. ``records`` keeps
    every step (``experiments/replay`` decides on them); the sums below are their totals over
    the steps that drafted."""

    steps: int = 0
    draft_tokens: int = 0
    drafts_equal_oracle: int = 0          # engine draft == oracle drafter's argmax chain
    expected_per_position: list[float] = field(default_factory=list)
    realized_per_position: list[int] = field(default_factory=list)
    records: list[ReplayStep] = field(default_factory=list)
    k: int = 0
    temperature: float = 0.0
    top_p: float = 1.0
    draft_mode: str = "argmax"

    def to_json(self) -> dict[str, Any]:
        n = self.steps or 1
        return {"steps": self.steps, "draft_tokens": self.draft_tokens,
                "drafts_equal_oracle": self.drafts_equal_oracle,
                "expected_per_position": [round(x / n, 6) for x in self.expected_per_position],
                "realized_per_position": [round(x / n, 6) for x in self.realized_per_position]}

    def records_json(self) -> dict[str, Any]:
        """Everything the decision reads, to record (and read back with ``from_records``)."""
        return {"k": self.k, "temperature": self.temperature, "top_p": self.top_p,
                "draft_mode": self.draft_mode, "steps": [r.to_json() for r in self.records]}

    @staticmethod
    def from_records(d: dict[str, Any]) -> Replay:
        out = Replay(k=int(d["k"]), temperature=float(d["temperature"]),
                     top_p=float(d["top_p"]), draft_mode=str(d.get("draft_mode", "argmax")),
                     expected_per_position=[0.0] * int(d["k"]),
                     realized_per_position=[0] * int(d["k"]))
        for r in d["steps"]:
            out.add(ReplayStep.from_json(r))
        return out

    def add(self, r: ReplayStep) -> None:
        self.records.append(r)
        if not r.drafts:
            return
        from specdoctor.oracle import rules

        if r.chain is not None:
            self.drafts_equal_oracle += sum(1 for a, b in zip(r.chain, r.drafts) if a == b)
        for i, x in enumerate(rules.expected_per_position(r.betas)[:self.k]):
            self.expected_per_position[i] += float(x)
        for i in range(min(r.accepted, self.k)):
            self.realized_per_position[i] += 1
        self.steps += 1
        self.draft_tokens += len(r.drafts)


def replay(engine: Sequence[EngineRequest], target: Any, drafter: Any, k: int, sampling: Any
           ) -> Replay:
    """Re-score every engine step: ``target`` a CachedLM, ``drafter`` a simulate drafter
    (``argmax_chain``: a draft model, prompt lookup, or a hidden-state head through
    ``heads.engine.HeadDrafter``), ``sampling`` a simulate.Sampling.

    Drafts by argmax or prompt lookup are one-hot: beta = p(draft) under the target's warped
    distribution. Sampled drafts (``sampling.draft == "probabilistic"``, a draft model): beta =
    min(1, p(draft) / q(draft)), the probability a correct verifier accepts that very token,
    and the chain is not compared (the drafts are random). Decode steps with no draft count
    too where the drafter would have proposed one (prompt lookup), as a drafting difference."""
    out = Replay(expected_per_position=[0.0] * k, realized_per_position=[0] * k, k=k,
                 temperature=float(sampling.temperature), top_p=float(sampling.top_p),
                 draft_mode=str(sampling.draft))
    for n, e in enumerate(engine):
        target.reset()
        drafter.reset()
        ctx = list(e.prompt_ids)
        for i, (draft, emitted) in enumerate(e.rows):
            if i > 0 and (draft or not _never_drafts_nothing(drafter)):
                out.add(_rescore(n, i, ctx, list(draft), emitted, target, drafter, k, sampling))
            ctx += list(emitted)
    return out


def shifted_chains(engine: Sequence[EngineRequest], replay: Replay, drafter: Any,
                   offset: int) -> list[list[int] | None]:
    """For each step of ``replay`` (re-scored from ``engine``), the drafter's argmax chain
    with its draft decode steps at rotary positions ``offset`` away from their own
    (``drafter.chain_shifted``), as long as the engine's drafts; None where the step was not
    compared. Raises ``NotImplementedError`` for a drafter that cannot shift its positions."""
    if not hasattr(drafter, "chain_shifted"):
        raise NotImplementedError(f"{type(drafter).__name__} has no positions to shift")
    contexts = _contexts(engine)
    out: list[list[int] | None] = []
    drafter.reset()
    for r in replay.records:
        if r.chain is None or not r.drafts:
            out.append(None)
            continue
        out.append(drafter.chain_shifted(contexts[(r.request, r.row)], len(r.drafts), offset))
    return out


def reference_chains(engine: Sequence[EngineRequest], replay: Replay, drafter: Any
                     ) -> list[list[int] | None]:
    """Another drafter's argmax chain (the same one at fp32, say) on the context of every step
    of ``replay`` that compared a chain, as long as that chain; None elsewhere."""
    contexts = _contexts(engine)
    drafter.reset()
    return [None if r.chain is None or not r.chain
            else list(drafter.argmax_chain(contexts[(r.request, r.row)], len(r.chain))[0])
            for r in replay.records]


def transformed_chains(engine: Sequence[EngineRequest], replay: Replay, drafter: Any,
                       transforms: Sequence[Any]) -> dict[str, list[list[int] | None]]:
    """For each transformation (``oracle.transforms``) the drafter runs, and each step of
    ``replay`` (re-scored from ``engine``), the drafter's argmax chain run as it says
    (``drafter.chain_with``), as long as the engine's drafts; None where the step was not
    compared. A transformation that changes nothing for this drafter (``chain_with`` gives
    None: a weight it already shares, taps that would leave the target) is left out of the
    result, so the caller can name it."""
    if not hasattr(drafter, "chain_with"):
        return {}
    contexts = _contexts(engine)
    out: dict[str, list[list[int] | None]] = {t.id: [] for t in transforms}
    live = set(out)
    drafter.reset()
    for r in replay.records:
        if r.chain is None or not r.drafts:
            for tid in out:
                out[tid].append(None)
            continue
        for t in transforms:
            ch = drafter.chain_with(contexts[(r.request, r.row)], len(r.drafts), t,
                                    prompt=len(engine[r.request].prompt_ids)) \
                if t.id in live else None
            if ch is None:
                live.discard(t.id)       # not applicable: the same for every context
            out[t.id].append(ch)
    return {tid: chains for tid, chains in out.items() if tid in live}


def _contexts(engine: Sequence[EngineRequest]) -> dict[tuple[int, int], list[int]]:
    """The context of every engine step, by (request, row): the prompt and what was emitted
    before it."""
    contexts: dict[tuple[int, int], list[int]] = {}
    for n, e in enumerate(engine):
        ctx = list(e.prompt_ids)
        for i, (_, emitted) in enumerate(e.rows):
            contexts[(n, i)] = list(ctx)
            ctx += list(emitted)
    return contexts


def _never_drafts_nothing(drafter: Any) -> bool:
    """A model drafter proposes at every step; prompt lookup may find nothing."""
    from specdoctor.oracle.simulate import NgramDrafter

    return not isinstance(drafter, NgramDrafter)


def _rescore(n: int, row: int, ctx: list[int], draft: list[int], emitted: Sequence[int],
             target: Any, drafter: Any, k: int, sampling: Any) -> ReplayStep:
    from specdoctor.oracle.simulate import ModelDrafter

    sampled_drafts = (sampling.draft == "probabilistic" and not sampling.greedy
                      and isinstance(drafter, ModelDrafter))
    chain: list[int] | None
    if sampled_drafts:
        chain, margins = None, []
    else:
        chain, margins = drafter.argmax_chain(ctx, len(draft) or k)
        chain = list(chain)
    if not draft:   # a lookup step that drafted nothing: its chain says whether it should have,
        # and what a correct verifier would have accepted of it is lost with it
        lost = _betas(ctx, chain, target, drafter, sampling, False)[0] if chain else None
        return ReplayStep(n, row, [], chain, list(margins), [], lost, 0, [])
    betas, tmargins = _betas(ctx, draft, target, drafter, sampling, sampled_drafts)
    chain_betas = None
    if chain is not None and chain != draft:
        # a lookup that finds nothing where the engine drafted: the chain accepts nothing
        chain_betas = _betas(ctx, chain, target, drafter, sampling, False)[0] if chain else []
    return ReplayStep(n, row, draft, chain, [float(x) for x in margins], betas, chain_betas,
                      max(0, min(len(emitted) - 1, len(draft))), tmargins)


def _betas(ctx: list[int], draft: list[int], target: Any, drafter: Any, sampling: Any,
           sampled_drafts: bool) -> tuple[list[float], list[float]]:
    import numpy as np

    from specdoctor.oracle import rules

    logits = target.logits(ctx + draft, len(draft) + 1)
    ps = [rules.warp(lg, sampling.temperature, sampling.top_p) for lg in logits[:len(draft)]]
    if sampled_drafts:
        betas = []
        for j, d in enumerate(draft):
            q = rules.warp(drafter.logits(ctx + draft[:j]), sampling.temperature,
                           sampling.top_p if sampling.q_top_p else 1.0)
            betas.append(float(min(1.0, ps[j][d] / q[d])) if q[d] > 0 else 0.0)
    else:
        betas = [float(p[d]) for p, d in zip(ps, draft)]
    margins = []
    for lg in logits[:len(draft)]:
        top2 = np.partition(np.asarray(lg, dtype=np.float64), -2)[-2:]
        margins.append(float(top2[1] - top2[0]))
    return betas, margins


def _first_diff(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def load_replay_models(config: Any) -> tuple[Any, Any]:
    """The target (a CachedLM) and the drafter ``replay`` re-scores with, for any method the
    oracle covers, read as ``run_oracle`` reads them (``config``: a runner.OracleConfig; its
    prompts are not used). Sets torch's CPU threads as the oracle does."""
    import torch

    from specdoctor.oracle import runner
    from specdoctor.oracle.models import (
        CachedLM, VocabMap, check_fits, check_vocab, load_model, param_count, pick_device,
    )
    from specdoctor.oracle.simulate import ModelDrafter, NgramDrafter
    from specdoctor.served_files import read_config

    runner.validate(config)
    device = pick_device(config.device)
    dirs = [config.target] + ([config.draft] if config.draft is not None else [])
    check_fits(dirs, device, config.dtype)
    if device == "cpu":
        torch.set_num_threads(runner.cpu_threads(config, sum(param_count(d) for d in dirs)))
    if config.method in runner.HEAD_METHODS:
        from specdoctor.oracle import heads
        from specdoctor.oracle.heads.engine import HeadDrafter
        from specdoctor.oracle.heads.target import StreamTarget

        head = heads.load(config.method, config.target, config.draft)
        model = load_model(config.target, device, config.dtype)
        head = head.to(device, getattr(torch, config.dtype))
        return CachedLM(model, device), HeadDrafter(StreamTarget(model, head.aux_ids), head,
                                                    device)
    target = CachedLM(load_model(config.target, device, config.dtype), device)
    if config.method == "ngram":
        mml = config.max_model_len or read_config(config.target).get("max_position_embeddings")
        return target, NgramDrafter(config.prompt_lookup_min, config.prompt_lookup_max, mml)
    vocab_map = VocabMap.load(config.vocab_map) if config.vocab_map else None
    assert config.draft is not None   # validate: draft_model has its drafter
    check_vocab(config.target, config.draft, vocab_map)
    drafter = ModelDrafter(CachedLM(load_model(config.draft, device, config.dtype), device),
                           int(read_config(config.target)["vocab_size"]), vocab_map)
    return target, drafter
