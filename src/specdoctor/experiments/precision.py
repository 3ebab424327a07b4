"""The target at a higher precision, as a verdict experiment of ``specdoctor diagnose``
(catalogue id ``target-precision-ab``, hypothesis ``target-hidden-noise``; Case A's H5: a
quantized target's hidden states too noisy for a drafter trained on bf16 ones).

What it does: read the precision the target is served at (the live engine's dtype when the
probes ran, else the launch's ``--dtype``, else its config's; ``--quantization`` and a
``quantization_config`` in the target's config), and relaunch the same command with the target
at float32 and without ``--quantization``, measured greedy on the same prompts against the
diagnosis' own greedy measurement (relaunched as served when there is none).

- A recovery (accepted per draft significantly higher, by the counterfactual's margin) confirms
  ``target-hidden-noise`` with the share of the room recovered. ``--dtype`` applies to the
  draft too, so the evidence says both ran at float32.
- No recovery excludes it. A target already served unquantized at float32 excludes it without a
  relaunch: there is no lower precision to blame.
- A checkpoint stored quantized (``quantization_config``) cannot be served unquantized from the
  same files: inconclusive, naming what to give. A relaunch that fails (a float32 target that
  does not fit) is inconclusive with the reason.
"""

from __future__ import annotations

import time
from typing import Any

from specdoctor.experiments import common

from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.launch import LaunchSpec

HID = "target-hidden-noise"
HIGH = "float32"


def served_precision(ctx: Context, target_cfg: dict[str, Any]) -> tuple[str | None, str | None,
                                                                       str]:
    """(dtype, quantization, where the dtype was read) of the served target."""
    v = ctx.engine_view
    quant = ctx.launch.arg("--quantization", "-q") if ctx.launch is not None else None
    stored = target_cfg.get("quantization_config")
    if isinstance(stored, dict):
        quant = quant or str(stored.get("quant_method") or "a quantization_config")
    if v is not None and v.target is not None and v.target.dtype:
        return v.target.dtype.replace("torch.", ""), quant, "the live engine"
    flag = ctx.launch.arg("--dtype") if ctx.launch is not None else None
    if flag and flag != "auto":
        return _norm(flag), quant, "the launch's --dtype"
    cfg = target_cfg.get("torch_dtype") or target_cfg.get("dtype")
    return (_norm(str(cfg)) if cfg else None), quant, "the target's config (--dtype auto)"


def _norm(d: str) -> str:
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32",
            "fp32": "float32"}.get(d, d)


def higher(launch: LaunchSpec) -> LaunchSpec:
    """The launch with the target at float32 and no ``--quantization``."""
    out = launch.with_arg("--dtype", HIGH)
    for flag in ("--quantization", "-q"):
        if out.arg(flag) is not None:
            out = out.without_arg(flag)
    return out


def without_relaunch(dtype: str | None, quant: str | None, stored_quantized: bool, where: str
                     ) -> Finding | None:
    """The verdict that needs no relaunch, if any (pure)."""
    if stored_quantized:
        return Finding(HID, Verdict.INCONCLUSIVE,
                       f"the target's checkpoint is stored quantized ({quant}): these files cannot "
                       f"be served at a higher precision; relaunch with an unquantized copy of "
                       f"the same target and compare")
    if dtype == HIGH and quant is None:
        return Finding(HID, Verdict.EXCLUDED,
                       f"the target is served unquantized at float32 ({where}): there is no lower "
                       f"precision for its hidden states to be noisy from")
    return None


class Experiment:
    id = "target-precision-ab"

    def unavailable(self, ctx: Context) -> str | None:
        return common.relaunch_unavailable(ctx, "relaunch the target at a higher precision")

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        assert ctx.launch is not None
        t0 = time.perf_counter()
        target_cfg = common.configs(ctx)[1]
        dtype, quant, where = served_precision(ctx, target_cfg)
        nums: dict[str, Any] = {"served_dtype": dtype, "quantization": quant,
                                "read_from": where}
        early = without_relaunch(dtype, quant,
                                 isinstance(target_cfg.get("quantization_config"), dict), where)
        if early is not None:
            return ExperimentResult(self.id, [early], nums, wall_s=time.perf_counter() - t0)
        p = common.params(ctx)
        before_m = ctx.measured.greedy
        error = None
        if before_m is None or before_m.total is None:
            before_m, _, error = common.measure_launch(ctx, ctx.launch, p, "precision-as-served")
        hi_launch = higher(ctx.launch)
        after_m, log, err = common.measure_launch(ctx, hi_launch, p, "precision-float32")
        cmds = [hi_launch.shell_command()]
        before = before_m.total if before_m is not None else None
        after = after_m.total if after_m is not None else None
        if before is None or after is None:
            why = err or error or "no profile"
            tail = "\n".join([x for x in log.splitlines() if x.strip()][-8:])
            f = Finding(HID, Verdict.INCONCLUSIVE, f"the float32 relaunch did not measure: {why}"
                        + (f"; its log ends:\n{tail}" if tail and after is None else ""))
            return ExperimentResult(self.id, [f], nums, commands=cmds, error=why,
                                    wall_s=time.perf_counter() - t0)
        change = (f"target (and draft, --dtype applies to both) {dtype or 'as served'}"
                  + (f" with {quant}" if quant else "") + f" → {HIGH} unquantized")
        f = rules.decide_counterfactual(HID, change, common.apd(before), common.apd(after),
                                        float(ctx.k or before.k or 1),
                                        common.significantly_higher(after, before))
        nums.update({"before": round(common.apd(before), 4), "after": round(common.apd(after), 4)})
        return ExperimentResult(self.id, [f], nums,
                                curves={"as served": before, f"after target at {HIGH}": after},
                                commands=cmds, wall_s=time.perf_counter() - t0)
