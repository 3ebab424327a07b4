"""The startup probes as a verdict experiment of ``specdoctor diagnose`` (catalogue id
``probes``; hypotheses ``draft-parallel-config`` and ``rope-sync``, leads for
``attention-mask`` and ``draft-config-mismatch``).

What it does: read what the live engine built for the draft, and compare it with what the files
and the launch say. The relaunch is the launch group's (``common.fresh_state``): the user's
command with a fresh compile cache and the ``startup`` probe pack after its own PYTHONPATH, the
same relaunch ``compile-cache-ab`` measures (Case A killed H3 and confirmed H2 in one launch
session). The pack's ``model-built`` probe walks every model as built — the target first, then
the draft — and says under which parallel layout and dtype it was built, with every attention
layer (window, causality, heads, backend) and rotary embedding (theta, style, scaling);
``aux-layers`` and ``dflash-metadata`` add what the target hands the drafter and the causality
DFlash's attention metadata carries (``view.read``). The decisions are ``compare``'s.

The engine view is left in ``ctx.engine_view`` for the masks and kernel experiments, and every
lead in ``ctx.leads`` for the counterfactuals. A relaunch that fails, or a pack that never
loaded, is inconclusive with the reason (the pack's own error lines, a non-chaining
``sitecustomize`` ahead of it, the log's last lines).
"""

from __future__ import annotations

import time
from typing import Any

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.probes import compare, view

TAIL_LINES = 8


def no_view_reason(shared: common.SharedRelaunch, v: view.EngineView) -> str:
    """Why the relaunch gave no engine view (pure)."""
    from specdoctor.experiments.taps.experiment import non_chaining_sitecustomize

    if shared.error and not shared.log:
        return f"the relaunch did not start: {shared.error}"
    if v.errors:
        return f"the startup pack reported: {v.errors[0]}"
    plain = non_chaining_sitecustomize(shared.launch.env.get("PYTHONPATH", ""))
    if plain:
        return (f"the startup pack printed nothing: {plain[0]} comes first on PYTHONPATH and "
                f"does not run the next sitecustomize, so the pack never loaded")
    tail = "\n".join([ln for ln in shared.log.splitlines() if ln.strip()][-TAIL_LINES:])
    why = f"the relaunch failed ({shared.error}); " if shared.error else ""
    return (why + "no model-built line in the server's log (the engine loaded no model through "
            "vLLM's BaseModelLoader, or it stopped before)" + (f"; its log ends:\n{tail}"
                                                               if tail else ""))


def decide(v: view.EngineView, ctx: Context, hypotheses: tuple[str, ...]
           ) -> tuple[list[Finding], list[Any]]:
    """The findings and leads of one engine view (pure, given the configs on disk)."""
    draft, target, draft_dir = common.configs(ctx)
    method = ctx.method or v.method
    found: list[Finding] = []
    leads = []
    if compare.PARALLEL in hypotheses:
        found.append(compare.parallel_finding(v, method))
    if compare.ROPE in hypotheses:
        f, more = compare.rope_finding(v, draft, target, method)
        found.append(f)
        leads += more
    for extra in (compare.mask_finding(v, draft, method),
                  compare.aux_finding(v, draft, target, draft_dir, method)):
        if extra is not None:
            found.append(extra)
    return found, leads


class Experiment:
    id = "probes"

    def unavailable(self, ctx: Context) -> str | None:
        return common.relaunch_unavailable(ctx, "relaunch with the startup probes")

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        from specdoctor.packs.run import collect

        t0 = time.perf_counter()
        shared = common.fresh_state(ctx)
        v = view.read(collect(shared.log))
        nums: dict[str, Any] = {"probe_lines": v.lines}
        if shared.measurement is not None and shared.measurement.total is not None:
            nums["accepted_per_draft_with_probes"] = round(
                common.apd(shared.measurement.total), 4)
        cmds = [shared.launch.shell_command()]
        if v.empty:
            why = no_view_reason(shared, v)
            return ExperimentResult(self.id, [Finding(h, Verdict.INCONCLUSIVE, f"not read: {why}")
                                              for h in hypotheses], nums, commands=cmds,
                                    error=shared.error, wall_s=time.perf_counter() - t0)
        ctx.engine_view = v
        found, leads = decide(v, ctx, hypotheses)
        ctx.leads.extend(leads)
        text = compare.summary(v)
        found = [Finding(f.hypothesis, f.verdict, f"{f.evidence} [{text}]" if f.hypothesis
                         == compare.PARALLEL else f.evidence, f.recovered, f.citations)
                 for f in found]
        nums["engine_view"] = v.to_json()
        nums["leads"] = [x.to_json() for x in leads]
        return ExperimentResult(self.id, found, nums, commands=cmds,
                                wall_s=time.perf_counter() - t0)
