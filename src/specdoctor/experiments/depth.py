"""Is k past the depth the drafter was trained for? Config plus the measured conditional rates.

Trained depth, from the drafter's own config: DFlash predicts a block of ``block_size`` tokens
(k up to block_size - 1 is trained); an MTP head with L layers is trained for L steps, and
reusing it once recursively is common practice, so "far past" is beyond 2L. Past that depth the
drafter is fed its own outputs: confirmed when the conditional acceptance beyond the depth falls
below DEPTH_SHARE of the conditional acceptance within it; excluded when k is within the depth,
or when the rates past it hold up.
"""

from __future__ import annotations

from statistics import mean

from specdoctor.acceptance.compare import conditional_from_unconditional
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.sizing import Size, shortfall
from specdoctor.served_files import read_config

DEPTH_SHARE = 0.9
HID = "k-beyond-training"


def trained_depth(method: str | None, draft_cfg: dict | None, target_cfg: dict | None
                  ) -> tuple[int, int] | None:
    """(trained depth, the k still reasonable) from the drafter's config, None if unbounded."""
    if method == "dflash" and draft_cfg and isinstance(draft_cfg.get("block_size"), int):
        d = int(draft_cfg["block_size"]) - 1
        return d, d
    if method == "mtp" and target_cfg and isinstance(target_cfg.get("num_nextn_predict_layers"), int):
        d = int(target_cfg["num_nextn_predict_layers"])
        return d, 2 * d
    return None


def past_depth_loss(per_position: list[float], allowed: int, held: float) -> Size:
    """Accepted per draft the positions past ``allowed`` lose against the same positions
    holding ``held``, the conditional acceptance of the trained positions, from the last
    position still allowed (pure)."""
    start = per_position[allowed - 1] if allowed >= 1 else 1.0
    kept = [start * held ** (i - allowed + 1) for i in range(allowed, len(per_position))]
    measured = sum(per_position)
    return shortfall(measured, sum(per_position[:allowed]) + sum(kept),
                     "the same draft with the positions past the trained depth accepted as "
                     "the trained ones are",
                     f"the positions past {allowed} held at the trained positions' conditional "
                     f"acceptance {held:.2f}")


def decide(k: int, depth: int, allowed: int, per_position: list[float]) -> Finding:
    """Pure: the verdict from k, the trained depth, the k still reasonable, and the
    unconditional rates: conditional acceptance at the trained positions vs past ``allowed``."""
    if k <= allowed:
        return Finding(HID, Verdict.EXCLUDED,
                       f"k={k} is within the trained depth {depth} (reasonable up to {allowed})")
    cond = [c for c in conditional_from_unconditional(per_position)]
    within = [c for c in cond[:depth] if c is not None]
    beyond = [c for c in cond[allowed:] if c is not None]
    if not within or not beyond:
        return Finding(HID, Verdict.INCONCLUSIVE,
                       f"k={k} > {allowed}, but no accepted draft reaches past it")
    w, b = mean(within), mean(beyond)
    ev = (f"k={k}, trained depth {depth}: conditional acceptance {w:.2f} at the trained "
          f"positions, {b:.2f} past position {allowed}")
    if b < DEPTH_SHARE * w:
        return Finding(HID, Verdict.CONFIRMED, ev + ": the positions past it decay",
                       recovered=min(1.0, (w - b) / max(w, 1e-9)),
                       size=past_depth_loss(per_position, allowed, w))
    return Finding(HID, Verdict.EXCLUDED, ev + ": they hold up")


class TrainedDepth:
    id = "trained-depth"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.measured.greedy is None or ctx.measured.greedy.total is None:
            return "no greedy measurement"
        if ctx.k is None:
            return common.UNKNOWN_K
        if ctx.target_dir is None:
            return common.UNKNOWN_TARGET
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        draft = read_config(ctx.draft_dir) if ctx.draft_dir else None
        target = read_config(ctx.target_dir) if ctx.target_dir else None
        bound = trained_depth(ctx.method, draft, target)
        if bound is None:
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.EXCLUDED,
                f"{ctx.method} drafts with a model of its own (or by lookup): no trained "
                f"block or head depth bounds k")])
        pp = ctx.measured.greedy.total.per_position or []
        return ExperimentResult(self.id, [decide(ctx.k or 0, bound[0], bound[1], pp)],
                                {"trained_depth": bound[0], "reasonable_k": bound[1], "k": ctx.k})
