"""``repeat-ab``: does the server keep state from one request to the next that lowers
acceptance?

The diagnosis measures greedy twice on the same prompts, one pass after the other, on one
server (``diagnose.evidence.measure``: ``greedy`` then ``greedy again``). A correct engine drafts
and verifies each request the same whatever it served before (greedy is deterministic, up to
batching noise), so the second pass accepts what the first did. A significant fall
(``rules.repeat_fell``: over drafts, on several prompts, by at least 5%) means requests see state that
earlier ones left: a prefix-cache hit that restores the target's KV but not the draft's, KV or
buffers not reset between requests. Where the diagnosis started the server itself, the first
pass ran on a fresh server, so the fall is what uptime costs and a restart gives back.
"""

from __future__ import annotations

from specdoctor.experiments import common

from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.sizing import shortfall

def fall(ctx: Context) -> rules.RepeatFall | None:
    """The first greedy pass against the second, paired by prompt (None: not both measured
    with per-request counts)."""
    m = ctx.measured
    if m.greedy is None or m.greedy_again is None:
        return None
    first, again = common.units(m.greedy), common.units(m.greedy_again)
    if first is None or again is None or first.shape[0] != again.shape[0]:
        return None
    return rules.repeat_fall(first, again)


class RepeatAB:
    id = "repeat-ab"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.measured.greedy is None or ctx.measured.greedy_again is None:
            return "greedy was not measured twice on the same server"
        return None if fall(ctx) is not None else "no per-request counts to pair the passes"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        r = fall(ctx)
        assert r is not None
        fresh = ctx.started_fresh
        ev = (f"the same {r.gain.prompts} prompts again on the same server: first pass "
              f"{r.first:.3f}, second {r.again:.3f} accepted per draft; {r.fell} prompt(s) "
              f"fell, {r.rose} rose"
              + ("" if r.gain.counts_significant else " (not beyond chance over drafts)"))
        if rules.repeat_fell(r):
            v = Verdict.CONFIRMED
            ev += (": the second pass accepts less, so requests see state earlier ones left "
                   "(a prefix-cache hit that restores the target's KV and not the drafter's, "
                   "KV or buffers not reset between requests)"
                   + ("; the first pass ran on the server this diagnosis started, so a "
                      "restart gives it back" if fresh else "; a restart was not tried"))
        else:
            v = Verdict.INCONCLUSIVE
            ev += (": no significant fall within one repeat (a drift over a longer uptime is "
                   "the restart's to show)")
        size = shortfall(r.again, r.first, "the first pass on this server",
                         "the first pass minus the second, the same prompts on the same server",
                         r.gain.low, r.gain.high) if v is Verdict.CONFIRMED else None
        return ExperimentResult(self.id, [Finding(h, v, ev, basis="comparison"
                                                  if v is Verdict.CONFIRMED else None, size=size)
                                          for h in hypotheses if h == "uptime-drift"],
                                curves={k: m.total for k, m in (
                                    ("first", ctx.measured.greedy),
                                    ("again", ctx.measured.greedy_again))
                                        if m is not None and m.total is not None})
