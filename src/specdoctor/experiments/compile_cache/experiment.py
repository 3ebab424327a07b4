"""The compile-cache A/B as a verdict experiment of ``specdoctor diagnose`` (catalogue id
``compile-cache-ab``, hypothesis ``compile-cache-pollution``).

The two arms of ``ab``: the user's launch as found, and the same launch with every compile cache
redirected to a fresh root under the diagnosis' working directory (``ab.isolated_env``): the
relaunch of the launch group ``fresh-state`` (``common.fresh_state``), which the probes share
(it carries the ``startup`` probe pack, whose probes change nothing the engine computes). The
as-found arm is the diagnosis' own greedy measurement of that launch when it has one (the same
command, the same cache, the same prompts), so the experiment costs one restart; otherwise it is
relaunched too. Both arms start through the context's launcher, the one way the diagnosis
launches servers. The verdict is ``ab.decide`` on the two profiles:

- "recovered" → compile-cache-pollution confirmed, with the share of the room up to k recovered;
- "no effect" → excluded;
- "inconclusive" (an arm that did not start or measure: the reason and its log tail; a change
  too small or the wrong way) → inconclusive.

The user's cache is never deleted, moved or edited: the as-found arm reads and writes what the
launch always does; only the isolated root, created here, is removed afterwards.
"""

from __future__ import annotations

import time

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.experiments import common
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.compile_cache import ab
from specdoctor.verdict.sizing import Size

HID = "compile-cache-pollution"
TAIL_LINES = 12


def verdict(found: AcceptanceProfile | None, isolated: AcceptanceProfile | None, k: int | None,
            failure: str | None = None) -> Finding:
    """The finding for the two arms (pure): ``failure`` names an arm that did not measure."""
    if failure is not None:
        return Finding(HID, Verdict.INCONCLUSIVE, failure)
    v, ev = ab.decide(found, isolated)
    text = "; ".join(ev)
    if v == "recovered":
        before, after = common.apd(found), common.apd(isolated)
        share = rules.recovered_share(before, after, float(k or 1))
        return Finding(HID, Verdict.CONFIRMED,
                       f"{text}; {before:.3f} → {after:.3f} accepted per draft with a fresh cache "
                       f"root ({share:.0%} of the room up to {float(k or 1):.2f} recovered)",
                       recovered=share,
                       size=Size(after - before, how="counterfactual: a fresh compile cache"))
    if v == "no effect":
        return Finding(HID, Verdict.EXCLUDED, f"a fresh compile cache changes nothing: {text}")
    return Finding(HID, Verdict.INCONCLUSIVE, text)


def tail(text: str, n: int = TAIL_LINES) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


class Experiment:
    id = "compile-cache-ab"

    def unavailable(self, ctx: Context) -> str | None:
        return common.relaunch_unavailable(ctx, "relaunch with a fresh compile cache")

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        assert ctx.launch is not None
        t0 = time.perf_counter()
        baseline = ctx.measured.greedy
        if baseline is not None and baseline.total is not None:
            found, found_err = baseline.total, None
        else:
            m, log, err = common.measure_launch(ctx, ctx.launch, common.params(ctx),
                                                "cache-as-found")
            found = m.total if m is not None else None
            found_err = None if found is not None else _failed("as found", err, log)
        # The isolated arm is the relaunch of the launch group, shared with the probes.
        shared = common.fresh_state(ctx)
        cmds = [shared.launch.shell_command()]
        m = shared.measurement
        isolated = m.total if m is not None else None
        iso_err = None if isolated is not None else _failed("isolated", shared.error, shared.log)
        failure = "; ".join(e for e in (found_err, iso_err) if e) or None
        f = verdict(found, isolated, ctx.k, failure)
        curves = {k: v for k, v in (("as found", found), ("after fresh compile cache", isolated))
                  if v is not None}
        nums = {"as_found": common.apd(found) if found else None,
                "isolated": common.apd(isolated) if isolated else None,
                "isolated_env": sorted(ab.CACHE_ENV)}
        return ExperimentResult(self.id, [f] if HID in hypotheses else [], nums, curves, cmds,
                                failure, time.perf_counter() - t0)


def _failed(arm: str, err: str | None, log: str) -> str:
    why = f"the {arm} arm did not measure: {err or 'no profile'}"
    t = tail(log)
    return why + (f"; its log ends:\n{t}" if t else "")
