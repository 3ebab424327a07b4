"""The engine's own draft tokens, captured, and set against the oracle token by token.

vLLM's per-request spec-decode metrics (``--per-request-spec-decode-metrics detailed``) carry
how many drafts each step accepted, not which tokens were drafted. The ``draft-trace`` probe
pack (``packs/draft_trace/``, a ``sitecustomize`` put on PYTHONPATH) records, per verify
step, the draft ids the scheduler sent and the tokens the step emitted. ``hook_env`` gives the
environment that turns it on; ``read`` parses its log; ``agreement`` walks engine and oracle
side by side.

Greedy only: a sampled trajectory is random, so it is compared by profile, not by token.
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
class Replay:
    """The engine's own steps re-scored by the oracle's models (teacher-forced on the engine's
    contexts). Works for sampled runs too: it asks, step by step, whether the drafts the engine
    verified are the drafts a correct drafter proposes there, and how many positions a correct
    verifier accepts in expectation, beside how many the engine accepted."""

    steps: int = 0
    draft_tokens: int = 0
    drafts_equal_oracle: int = 0          # engine draft == oracle drafter's argmax chain
    expected_per_position: list[float] = field(default_factory=list)
    realized_per_position: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        n = self.steps or 1
        return {"steps": self.steps, "draft_tokens": self.draft_tokens,
                "drafts_equal_oracle": self.drafts_equal_oracle,
                "expected_per_position": [round(x / n, 6) for x in self.expected_per_position],
                "realized_per_position": [round(x / n, 6) for x in self.realized_per_position]}


def replay(engine: Sequence[EngineRequest], target: Any, drafter: Any, k: int, sampling: Any
           ) -> Replay:
    """Re-score every engine step: ``target`` a CachedLM, ``drafter`` a simulate drafter,
    ``sampling`` a simulate.Sampling (drafts are taken as one-hot: argmax or prompt lookup)."""
    from specdoctor.oracle import rules

    out = Replay(expected_per_position=[0.0] * k, realized_per_position=[0] * k)
    for e in engine:
        target.reset()
        drafter.reset()
        ctx = list(e.prompt_ids)
        for draft, emitted in e.rows:
            if draft:
                mine, _ = drafter.argmax_chain(ctx, len(draft))
                out.drafts_equal_oracle += sum(1 for a, b in zip(mine, draft) if a == b)
                logits = target.logits(ctx + list(draft), len(draft) + 1)
                betas = [rules.warp(lg, sampling.temperature, sampling.top_p)[d]
                         for lg, d in zip(logits, draft)]
                for i, x in enumerate(rules.expected_per_position(betas)[:k]):
                    out.expected_per_position[i] += float(x)
                for i in range(min(len(emitted) - 1, k)):
                    out.realized_per_position[i] += 1
                out.steps += 1
                out.draft_tokens += len(draft)
            ctx += list(emitted)
    return out


def _first_diff(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))
