"""``verdict-patch``: a known engine defect, fixed, as a counterfactual.

For each open hypothesis the registry of verdict patches (``packs.verdicts``) covers, the patch's
check runs with the launch's own Python and environment: the function it replaces exists in
the installed engine and has the defect's form, the code path is the one the server takes, and
the function in force still misbehaves (a patch already served makes it behave). Where it
applies, the user's command is relaunched with the patch (its pack first on PYTHONPATH), the
measurements the defect touches are taken again on the same prompts and compared with their
oracle: the patched engine meeting the oracle where the served one did not confirms the
hypothesis (basis counterfactual), with the upstream report and fix cited and the stop-gap
(the exact command that serves with the pack) in the evidence. A patch that does not apply, or
that changes nothing, leaves the hypothesis to the replay.
"""

from __future__ import annotations

import time
from typing import Any

from specdoctor.experiments import common

from specdoctor.verdict import rules, sizing
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.oracle_gap import expected_profile, gap
from specdoctor.packs import verdicts


def decide_patch(patch_id: str, hypothesis: str, before: rules.Gap, after: rules.Gap,
                 moved: bool, on: str = sizing.GREEDY) -> Finding:
    """Served vs patched, each against the same oracle (pure).

    ``moved``: the patched measurement differs significantly from the served one (paired over
    prompts). Confirmed when the served engine was not shown to meet its oracle, the patch
    moved it, and the patched one is closer: fully when it meets the oracle, in part (the share
    of the distance it closed) when a significant gap remains. A served engine whose gap is not
    significant but not bounded either (``Gap.bounded``: a drafting defect that flips a few
    greedy argmaxes over a handful of prompts) is not "already at its oracle": the paired
    served-vs-patched comparison decides. Inconclusive otherwise: the defect is in the code but
    fixing it does not explain this gap, or not significantly over these prompts."""
    dist_before = abs(before.oracle - before.measured)
    dist_after = abs(after.oracle - after.measured)
    share = 0.0 if dist_before <= 0 else max(0.0, min(1.0, 1 - dist_after / dist_before))
    size = sizing.Size(dist_before - dist_after, on=on,
                       how=f"counterfactual: served with {patch_id}, the distance to the oracle "
                           f"closed")
    ev = (f"served with {patch_id}: {after.text()} (as served: measured {before.measured:.3f} "
          f"vs oracle {before.oracle:.3f})")
    if before.bounded or (before.equal and dist_before <= 0):
        return Finding(hypothesis, Verdict.INCONCLUSIVE,
                       f"{ev}: the served engine already reaches its oracle")
    if moved and dist_after < dist_before and after.equal:
        return Finding(hypothesis, Verdict.CONFIRMED, f"{ev}: with the defect fixed the engine "
                       f"meets its oracle", recovered=share, basis="counterfactual", size=size)
    if moved and dist_after < dist_before:
        return Finding(hypothesis, Verdict.CONFIRMED, f"{ev}: fixing the defect closes {share:.0%} "
                       f"of the distance to the oracle; a gap remains (another cause beside it)",
                       recovered=share, basis="counterfactual", size=size)
    if before.equal:   # not significant, and not bounded either
        iv = "" if before.low is None else f" (gap 95% [{before.low:.3f}, {before.high:.3f}])"
        return Finding(hypothesis, Verdict.INCONCLUSIVE, f"{ev}: the served engine is not shown "
                       f"to differ from its oracle{iv}, nor does the patch move it significantly "
                       f"closer over these prompts (the replay compares the drafts themselves)")
    return Finding(hypothesis, Verdict.INCONCLUSIVE, f"{ev}: fixing the defect does not bring "
                   f"the engine to its oracle: this gap has another cause (the replay localises "
                   f"it)")


def moved_significantly(after: Any, before: Any) -> bool:
    """Paired over prompts: patched minus served accepted per draft, interval excluding 0."""
    from specdoctor.oracle.compare import compare_units

    a, b = common.units(after), common.units(before)
    if a is None or b is None or a.shape[0] != b.shape[0]:
        return common.significantly_higher(after.total, before.total) or \
            common.significantly_higher(before.total, after.total)
    return compare_units(a, b).accepted_per_draft.significant


class Experiment:
    id = "verdict-patch"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command: a verdict patch is tried by relaunching with it"
        return None

    def __init__(self) -> None:
        self.curves: dict[str, Any] = {}

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        self.curves = {}
        patches = [p for p in verdicts.for_hypotheses(hypotheses) if p.serves(ctx.method)]
        found: list[Finding] = []
        numbers: dict[str, Any] = {}
        commands: list[str] = []
        covered = {p.hypothesis for p in patches}
        for h in hypotheses:
            if h not in covered:
                found.append(Finding(h, Verdict.INCONCLUSIVE,
                                     f"no verdict patch for a known defect covers it for a "
                                     f"{ctx.method or 'this'} drafter"))
        for p in patches:
            f, num, cmd = self._one(ctx, p)
            found.append(f)
            numbers[p.id] = num
            commands += cmd
        return ExperimentResult(self.id, found, numbers, dict(self.curves), commands=commands,
                                wall_s=time.perf_counter() - t0)

    def _one(self, ctx: Context, p: verdicts.VerdictPatch
             ) -> tuple[Finding, dict[str, Any], list[str]]:
        from specdoctor.packs import run as probes

        assert ctx.launch is not None
        ctx.progress(f"verdict-patch: does {p.id} apply to this engine?")
        app = verdicts.applicability(p, ctx.launch)
        num: dict[str, Any] = {"patch": p.to_json(), "applicability": app.to_json()}
        cites = (app.citation,) if app.citation else ()
        if not app.applies:
            return (Finding(p.hypothesis, Verdict.INCONCLUSIVE,
                            f"verdict patch {p.id} ({p.defect}) does not apply: {app.reason}",
                            citations=cites), num, [])
        before = self._gaps(ctx, p)
        if not before:
            return (Finding(p.hypothesis, Verdict.INCONCLUSIVE,
                            f"{p.id} applies ({app.reason}), but none of the measurements it "
                            f"changes ({', '.join(p.measurements)}) was compared with its "
                            f"oracle"), num, [])
        pack, _ = probes.prepare(p.id, ctx.workdir / f"verdict-{p.id}")
        launch = probes.with_pack(ctx.launch, pack)
        label = f"verdict-{p.id}"
        results: list[Finding] = []
        curves: dict[str, Any] = {}
        for what, (gap_before, oracle, measured, t, top_p) in before.items():
            m, log_text, err = common.measure_launch(ctx, launch, common.params(ctx, t, top_p),
                                                     f"{label}-{what}")
            replaced = [ln for ln in probes.collect(log_text) if ln.probe == p.id
                        and "replaced" in ln.data]
            if m is None or err:
                results.append(Finding(p.hypothesis, Verdict.INCONCLUSIVE,
                                       f"relaunch with {p.id}: {err or 'no measurement'}"))
                continue
            if not replaced:
                results.append(Finding(p.hypothesis, Verdict.INCONCLUSIVE,
                                       f"relaunch with {p.id}: the server's log has no line of "
                                       f"the patch replacing {p.replaces}, so it did not run "
                                       f"patched"))
                continue
            after, comparison = gap(oracle, m)
            num[what] = {"before": gap_before.__dict__, "after": after.__dict__,
                         "comparison": comparison.to_json(),
                         "replaced": [ln.data for ln in replaced[:1]]}
            curves[f"{what}, as served"] = measured.total
            curves[f"{what}, served with {p.id}"] = m.total
            curves[f"{what}, oracle"] = expected_profile(oracle)
            results.append(decide_patch(p.id, p.hypothesis, gap_before, after,
                                        moved_significantly(m, measured),
                                        sizing.GREEDY if t <= 0 else sizing.SAMPLED))
        best = max(results, key=lambda f: (f.verdict is Verdict.CONFIRMED, f.recovered or 0.0))
        if best.verdict is Verdict.CONFIRMED:
            refs = ", ".join(f"{c.ref} ({c.what})" for c in p.citations[:2])
            best = Finding(best.hypothesis, best.verdict,
                           f"{best.evidence}; the defect is in this engine's code ({app.reason}); "
                           f"upstream: {refs}; the fix and the stop-gap are in the report",
                           recovered=best.recovered, citations=cites, basis=best.basis,
                           size=best.size)
        num["stop_gap"] = verdicts.serve_hint(p, ctx.launch)
        num["curves"] = {k: v.to_json() for k, v in curves.items()}
        self.curves.update(curves)
        return best, num, [launch.shell_command()]

    @staticmethod
    def _gaps(ctx: Context, p: verdicts.VerdictPatch
              ) -> dict[str, tuple[rules.Gap, Any, Any, float, float]]:
        out = {}
        if "sampled" in p.measurements and ctx.oracle_sampled_gap is not None \
                and ctx.sampling is not None and ctx.measured.sampled is not None:
            out["sampled"] = (ctx.oracle_sampled_gap, ctx.oracle_sampled,
                              ctx.measured.sampled, *ctx.sampling)
        if "greedy" in p.measurements and ctx.oracle_gap is not None \
                and ctx.measured.greedy is not None:
            out["greedy"] = (ctx.oracle_gap, ctx.oracle_greedy, ctx.measured.greedy, 0.0, 1.0)
        return out

