"""Oracle vs measured, position by position: the gap, its interval, whether it is significant.

Both sides are per-prompt units on the same prompts (``measure`` records one request per
prompt), so the gap's interval comes from a paired bootstrap over prompts: resampling the same
prompts on both sides cancels most of the prompt-to-prompt spread.

Reading (the question this module exists for):
- measured significantly BELOW the oracle: the engine loses acceptance that these weights
  give (wiring, state, numerics): look inside the engine;
- measured significantly ABOVE: the engine accepts what a correct engine with these weights
  does not (a verifier that accepts too much is as broken as one that accepts too little):
  engine-side too, once the oracle runs what the server ran (``--compare RUN_ID`` takes the
  weights, k, sampling and prompts from the recorded run);
- no significant gap: the engine reaches what the weights allow; if that is low, the drafter
  is weak for this data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdoctor.oracle import stats

# Below this oracle position-0 rate "the drafter is weak for this data".
WEAK_DRAFTER_POS0 = 0.5


@dataclass
class PositionGap:
    position: int
    oracle: stats.RatioCI
    measured: stats.RatioCI
    gap: stats.RatioCI        # oracle - measured

    @property
    def significant(self) -> bool:
        g = self.gap
        return g.low is not None and g.high is not None and (g.low > 0 or g.high < 0)

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "oracle": self.oracle.to_json(),
                "measured": self.measured.to_json(), "gap": self.gap.to_json(),
                "significant": self.significant}


@dataclass
class Comparison:
    positions: list[PositionGap]
    accepted_per_draft: PositionGap
    verdict: str
    prompts: int
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"positions": [p.to_json() for p in self.positions],
                "accepted_per_draft": self.accepted_per_draft.to_json(),
                "convention": "unconditional per-position rates; gap = oracle - measured; "
                              "[value, ci95 low, high], paired bootstrap over prompts",
                "verdict": self.verdict, "prompts": self.prompts, "notes": self.notes}


def with_total(units: np.ndarray) -> np.ndarray:
    """Append a column: accepted over all positions (for accepted per draft)."""
    return np.column_stack([units, units[:, 1:].sum(axis=1)])


def compare_units(oracle: np.ndarray, measured: np.ndarray, seed: int = 0) -> Comparison:
    """Units: rows = prompts (same order on both sides), columns = drafts, accepted at 0..k-1."""
    k = max(oracle.shape[1], measured.shape[1]) - 1
    o, m = _pad(oracle, k + 1), _pad(measured, k + 1)
    o, m = with_total(o), with_total(m)
    orc, mrc = stats.position_rates(o, seed=seed), stats.position_rates(m, seed=seed)
    gaps = stats.paired_gaps(o, m, seed=seed)
    rows = [PositionGap(i, orc[i], mrc[i], gaps[i]) for i in range(k)]
    total = PositionGap(-1, orc[k], mrc[k], gaps[k])
    return Comparison(rows, total, verdict(rows), prompts=o.shape[0])


def _pad(u: np.ndarray, width: int) -> np.ndarray:
    u = np.asarray(u, dtype=np.float64)
    if u.shape[1] >= width:
        return u
    return np.column_stack([u, np.zeros((u.shape[0], width - u.shape[1]))])


def verdict(rows: list[PositionGap]) -> str:
    below = [r.position for r in rows if r.significant and (r.gap.value or 0) > 0]
    above = [r.position for r in rows if r.significant and (r.gap.value or 0) < 0]
    if below and above:
        return (f"measured differs from the oracle both ways: significantly below it at "
                f"position(s) {', '.join(map(str, below))} and ABOVE it at position(s) "
                f"{', '.join(map(str, above))}: a correct engine with these weights does "
                f"neither (its verifier, or its drafts, are not a correct engine's); with the "
                f"server's own settings (--compare RUN_ID) that is an engine-side defect: "
                f"specdoctor diagnose --launch localises it")
    if below:
        return (f"the engine loses acceptance: measured is significantly below the oracle at "
                f"position(s) {', '.join(map(str, below))}; these weights allow more, so look "
                f"inside the engine (wiring, state, numerics)")
    if above:
        return (f"measured is significantly ABOVE the oracle at position(s) "
                f"{', '.join(map(str, above))}: the engine accepts what a correct engine with "
                f"these weights does not (its verifier, or its drafts, are not a correct "
                f"engine's); with the server's own settings (--compare RUN_ID) that is an "
                f"engine-side defect: specdoctor diagnose --launch localises it")
    pos0 = rows[0].oracle.value if rows else None
    if pos0 is not None and pos0 < WEAK_DRAFTER_POS0:
        return (f"no significant gap: the engine reaches what these weights allow, and that is "
                f"low (oracle position 0 = {pos0:.3f}): the drafter is weak for this data")
    return "no significant gap: the engine reaches the acceptance these weights allow"


# -- a measured run, as stored ----------------------------------------------------------------

@dataclass
class MeasuredRun:
    run_id: int
    params: dict[str, Any]
    prompts: list[str]
    units: np.ndarray              # rows per request in idx order: drafts, accepted per position
    launch_spec: dict[str, Any] | None

    def server_settings(self) -> dict[str, Any]:
        """Target, method, k, draft, tokenizer, prompt lookup, max_model_len, dtype from the
        recorded launch."""
        argv = list((self.launch_spec or {}).get("argv") or [])

        def last(flag: str) -> str | None:  # argparse keeps the last occurrence of a flag
            idx = [i for i, a in enumerate(argv[:-1]) if a == flag]
            return argv[idx[-1] + 1] if idx else None

        out: dict[str, Any] = {}
        for flag, key in (("--model", "target"), ("--max-model-len", "max_model_len"),
                          ("--dtype", "dtype"), ("--tokenizer", "tokenizer")):
            if last(flag) is not None:
                out[key] = last(flag)
        spec_json = last("--speculative-config")
        if spec_json is not None:
            try:
                sc = json.loads(spec_json)
            except ValueError:
                sc = {}
            method = sc.get("method")
            out.update({"method": method, "k": sc.get("num_speculative_tokens"),
                        "draft": (sc.get("model")
                                  if method in ("draft_model", "eagle3", "dflash") else None),
                        "prompt_lookup_min": sc.get("prompt_lookup_min"),
                        "prompt_lookup_max": sc.get("prompt_lookup_max"),
                        "draft_sample_method": sc.get("draft_sample_method", "greedy")})
        return out


def measured_run(run_id: int, params: dict[str, Any], prompts: list[str],
                 rows: list[list[int]], launch_spec: dict[str, Any] | None) -> MeasuredRun:
    """A ``measure`` run with its per-request profiles (the units of the paired bootstrap), from
    what the store holds of it (the command reads the store: ``bench.measure.load_run``)."""
    width = max(len(r) for r in rows)
    units = np.array([r + [0] * (width - len(r)) for r in rows], dtype=np.float64)
    return MeasuredRun(run_id, params, prompts, units, launch_spec)
