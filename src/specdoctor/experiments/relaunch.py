"""Live experiments that change the load or the launch, not the drafter: concurrency A/B on the
running server, speculation off, a plain restart.

Speed with and without speculation is compared as decode speed: each request's output tokens
over its own latency, the same prompts in the same order on both servers, so that what lies
between requests (metric scrapes, the client) is left out. Each prompt counts with its fastest
of three passes on either side (the measurement and two more on the live server with
speculation, three after a warm-up without; as many on each side when the server with
speculation was already stopped), so a load spike or a first-use compile does not count. The
two servers still run one after the other, so what else the machine does moves their ratio: a CPU
probe (``bench.probe``) before and after each side's passes measures how far the machine's
speed moved, and that drift is counted against the ratio. ``draft-overhead`` is confirmed only
when speculation is clearly slower (the total ratio and the median of the per-prompt ratios,
each times 1 + drift, under CLEAR_SHARE; a load spike moves some prompts, not the median),
excluded when it is not slower (both, divided by 1 + drift, at least SLOWER_SHARE, the
signature's threshold), and inconclusive in between. Seen on a shared
2-core machine (the clinic, decode speed): healthy setups from 0.87x to 1.75x of spec-off, the
same prompt-lookup setup at 0.88x and 1.21x in two comparisons, a drafter carrying the target's
function in 26x its weights at 0.25x."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from specdoctor.acceptance.compare import differs, drift
from specdoctor.acceptance.speedup import size_ratio
from specdoctor.bench import measure as proto
from specdoctor.bench import probe
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.sizing import shortfall
from specdoctor.verdict.rules import (
    LOAD_IN_FLIGHT_SHARE,
    LOAD_SHARE,
    SLOWER_SHARE,
    decide_speed_split,
    speed_split,
)
from specdoctor.launch import free_port

Timed = tuple[int, float]   # (output tokens, latency in seconds) of one request
# Clearly slower: beyond what load between two runs on a shared machine moves the ratio.
CLEAR_SHARE = 0.7
# Timing passes over the prompts (each prompt counts at its best): with speculation off, and on
# the live server with speculation beside the measurement itself.
OFF_PASSES = 3
ON_EXTRA_PASSES = 2


@dataclass(frozen=True)
class SpeedComparison:
    """Decode speed with speculation against without, on the same prompts."""

    tok_s_on: float
    tok_s_off: float
    paired_median: float     # median over prompts of (on tok/s) / (off tok/s)
    prompts: int
    drift: float = 0.0       # how far the machine's speed moved between the sides (probe)

    @property
    def ratio(self) -> float:
        return self.tok_s_on / self.tok_s_off

    @property
    def verdict(self) -> Verdict:
        """draft-overhead: confirmed when clearly slower, excluded when not slower, each with
        the machine's drift counted against it (one side may have run up to ``1 + drift``
        times faster or slower than the other for reasons of its own)."""
        low, high = self.ratio_range
        if high < CLEAR_SHARE:
            return Verdict.CONFIRMED
        return Verdict.EXCLUDED if low >= SLOWER_SHARE else Verdict.INCONCLUSIVE

    @property
    def ratio_range(self) -> tuple[float, float]:
        """The least and the most the ratio can be: the pooled ratio and the per-prompt median,
        widened by the machine's drift (as ``verdict`` counts them)."""
        room = 1.0 + self.drift
        return (min(self.ratio, self.paired_median) / room,
                max(self.ratio, self.paired_median) * room)

    def text(self) -> str:
        moved = ("" if self.drift <= 0 else
                 f"; the machine's speed moved by up to {self.drift:.0%} across the runs (a CPU "
                 f"probe before and after each side's passes), counted against the ratio")
        return (f"spec on {self.tok_s_on:.1f} tok/s vs off {self.tok_s_off:.1f} tok/s "
                f"({self.ratio:.2f}x; per-prompt median {self.paired_median:.2f}x over "
                f"{self.prompts} prompts{moved})")


def tok_s(timed: Sequence[Timed]) -> float:
    tokens = sum(t for t, _ in timed)
    return tokens / max(sum(s for _, s in timed), 1e-9)


def compare_speed(on: Sequence[Timed], off: Sequence[Timed], drift: float = 0.0
                  ) -> SpeedComparison | None:
    """Pure: None when there is nothing to compare (no tokens on either side)."""
    pairs = [(a, b) for a, b in zip(on, off) if a[0] > 0 and b[0] > 0 and a[1] > 0 and b[1] > 0]
    if not pairs or tok_s(on) <= 0 or tok_s(off) <= 0:
        return None
    med = statistics.median((a[0] / a[1]) / (b[0] / b[1]) for a, b in pairs)
    return SpeedComparison(tok_s(on), tok_s(off), med, len(pairs), drift)


class ConcurrencyAB:
    id = "concurrency-ab"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.measured.greedy is None:
            return "no greedy measurement at c=1"
        if ctx.url is None and ctx.measured.loaded is None:
            return "no live server"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        # the measurement's own c=8 pass where it was taken, against the second c=1 pass (both
        # after the first: the same prompts seen before)
        m = ctx.measured.loaded
        ref = ctx.measured.load_reference
        if m is None:   # no c=8 pass yet (a pass taken without its load was retried there)
            loaded = common.measure_loaded(ctx, ctx.url or "", common.params(ctx, concurrency=8))
            m, ref = loaded.measurement, loaded.reference
        one = (ref or ctx.measured.greedy_again or ctx.measured.greedy).total
        if m.total is None or one is None:
            return ExperimentResult(self.id, [Finding("load-dependent", Verdict.INCONCLUSIVE,
                                                      f"c=8 measurement failed: {m.error}")],
                                    error=m.error)
        loaded, alone = common.apd(m.total), common.apd(one)
        ev = f"c=8 {loaded:.3f} vs c=1 {alone:.3f} accepted per draft"
        v = Verdict.CONFIRMED if differs(m.total, one, LOAD_SHARE) else Verdict.EXCLUDED
        size = shortfall(loaded, alone, "the same server at concurrency 1",
                         "the same prompts at concurrency 1 minus at 8") if alone > loaded else None
        if v is Verdict.EXCLUDED and not common.load_reached(m):
            # the requests never ran together: equal acceptance says nothing about load
            x, what = common.load_seen(m)
            v = Verdict.INCONCLUSIVE
            ev += (f"; not decided: the requests did not run together ("
                   f"{'?' if x is None else f'{x:.1f}'} {what} of {m.params.concurrency} sent; "
                   f"the load needs {LOAD_IN_FLIGHT_SHARE * m.params.concurrency:.1f})")
        return ExperimentResult(self.id, [Finding("load-dependent", v, ev, size=size)],
                                curves={"c=1": one, "c=8": m.total})


def timed_requests(url: str, ctx: Context, passes: int = 1, warm_up: bool = True
                   ) -> list[list[Timed]]:
    """Tokens and latency of each prompt at c=1, greedy, ``passes`` times over the prompts,
    with nothing read from /metrics (a server with speculation off has no spec-decode
    counters)."""
    p = common.params(ctx)
    model = proto.served_model(url)
    if warm_up:
        proto.complete(url, model, ctx.prompts[0], p)
    out: list[list[Timed]] = []
    for _ in range(passes):
        one: list[Timed] = []
        for i, prompt in enumerate(ctx.prompts):
            resp, latency = proto.complete(url, model, prompt, p, i)
            one.append((int((resp.get("usage") or {}).get("completion_tokens", 0)), latency))
        out.append(one)
    return out


def best_of(passes: Sequence[Sequence[Timed]]) -> list[Timed]:
    """Per prompt, its fastest pass: what the server does when nothing else holds it up (pure)."""
    if not passes:
        return []
    n = min(len(x) for x in passes)
    return [max((x[i] for x in passes), key=lambda t: t[0] / t[1] if t[1] > 0 else 0.0)
            for i in range(n)]


def measured_timing(m: proto.Measurement) -> list[Timed]:
    return [(r.completion_tokens, r.latency_s) for r in sorted(m.requests, key=lambda r: r.index)]


def time_spec_on(ctx: Context) -> None:
    """More timing passes on the live server with speculation on (before it is stopped for
    the spec-off one), kept in ``ctx.spec_on_passes``."""
    if ctx.url is not None:
        ctx.progress("speculation on: timing passes")
        ctx.speed_probes.append(probe.cpu_speed())
        ctx.spec_on_passes.extend(
            timed_requests(ctx.url, ctx, passes=ON_EXTRA_PASSES, warm_up=False))
        ctx.speed_probes.append(probe.cpu_speed())


def _timed_then_stopped(ctx: Context, server: Any, passes: int
                        ) -> tuple[list[list[Timed]], list[float]]:
    """``passes`` timed passes on ``server`` (``timed_requests``) between two CPU probes, and
    the server stopped whatever happens."""
    assert ctx.launcher is not None
    try:
        probes = [probe.cpu_speed()]
        timed = timed_requests(server.url, ctx, passes=passes)
        probes.append(probe.cpu_speed())
    finally:
        ctx.launcher.stop(server)
    return timed, probes


class SpecOffBaseline:
    id = "spec-off-baseline"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command"
        return None if ctx.measured.greedy is not None else "no greedy measurement"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        assert ctx.launch is not None and ctx.launcher is not None
        # the same server with speculation off (vLLM: per-request spec metrics dropped too)
        off = ctx.launch.without_speculation().with_port(free_port())
        log = ctx.workdir / "server-spec-off.log"
        ctx.progress("speculation off: starting the server")
        try:
            server = ctx.launcher.start(off, log)
        except SpecdoctorError as exc:
            return ExperimentResult(self.id, [Finding("draft-overhead", Verdict.INCONCLUSIVE,
                                                      f"spec-off server did not start: {exc}")],
                                    commands=[off.shell_command()], error=str(exc))
        ctx.progress("speculation off: measuring")
        off_passes, probes = _timed_then_stopped(ctx, server, OFF_PASSES)
        on_passes = [measured_timing(ctx.measured.greedy), *ctx.spec_on_passes]
        # as many passes on each side: a best of three against a best of one would favour it
        n = min(len(on_passes), len(off_passes))
        moved = probe.drift([*ctx.speed_probes, *probes]) if ctx.speed_probes else 0.0
        c = compare_speed(best_of(on_passes[:n]), best_of(off_passes[:n]), moved)
        if c is None:
            return ExperimentResult(self.id, [Finding(
                "draft-overhead", Verdict.INCONCLUSIVE, "no output tokens to time on one side")],
                commands=[off.shell_command()])
        ctx.tok_s_spec_off, ctx.tok_s_spec_on = c.tok_s_off, c.tok_s_on
        v = c.verdict
        ev = c.text() + {
            Verdict.CONFIRMED: f": speculation costs far more than it gains (under "
                               f"{CLEAR_SHARE:.2f}x)",
            Verdict.EXCLUDED: f": not slower (threshold {SLOWER_SHARE:.2f}x)",
            Verdict.INCONCLUSIVE: f": slower, but not beyond what load between two runs can "
                                  f"move ({CLEAR_SHARE:.2f}x); rerun on a quiet machine"}[v]
        numbers: dict[str, object] = {"tok_s_on": c.tok_s_on, "tok_s_off": c.tok_s_off,
                                      "paired_median": c.paired_median, "drift": c.drift,
                                      "probes_on": list(ctx.speed_probes), "probes_off": probes}
        total = ctx.measured.greedy.total
        k = ctx.k or (total.k if total is not None else None)
        if v is Verdict.EXCLUDED:
            finding = Finding("draft-overhead", v, ev, basis="comparison")
        elif total is None or total.accepted_per_draft is None or not k:
            finding = Finding("draft-overhead", Verdict.INCONCLUSIVE,
                              f"{ev}; the acceptance it ran with is not known, so the draft's "
                              f"cost and the acceptance cannot be told apart",
                              basis="comparison")
        else:
            split = speed_split(c.ratio, total.accepted_per_draft, k, ctx.method_reference,
                                size_ratio(ctx.draft_dir, ctx.target_dir), c.ratio_range)
            numbers["split"] = split.to_json()
            finding = decide_speed_split(v, split)
            finding = Finding(finding.hypothesis, finding.verdict,
                              f"{c.text()}; {finding.evidence}", finding.recovered,
                              basis=finding.basis)
            if finding.verdict is Verdict.CONFIRMED:
                finding = self._again(ctx, finding, off_passes, probes, total.accepted_per_draft,
                                      k, numbers)
            if finding.verdict is Verdict.CONFIRMED:
                finding = replace(finding, size=split.size())
        return ExperimentResult(self.id, [finding], numbers, commands=[off.shell_command()])

    def _again(self, ctx: Context, first: Finding, off_passes: list[list[Timed]],
               probes: list[float], accepted: float, k: int, numbers: dict[str, object]
               ) -> Finding:
        """Before the draft's cost is named: speculation on measured again, after the spec-off
        server, as many passes as it had, against the same spec-off passes. The first
        comparison's speculation-on side was measured at the start of the diagnosis; a ratio
        that moves between two runs of one server more than the drift probe can see (a lab MTP
        at 0.60x, then 0.84x at the same commit) does not name a cause. Confirmed only when
        both comparisons confirm it."""
        assert ctx.launch is not None and ctx.launcher is not None
        on = ctx.launch.with_port(free_port())
        ctx.progress("speculation on again: starting the server")
        try:
            server = ctx.launcher.start(on, ctx.workdir / "server-spec-on-again.log")
        except SpecdoctorError as exc:
            return Finding(first.hypothesis, Verdict.INCONCLUSIVE,
                           f"{first.evidence}; measured again with speculation on, the server "
                           f"did not start ({str(exc)[:120]}), so the slowdown was not seen "
                           f"twice", basis=first.basis)
        ctx.progress("speculation on again: measuring")
        on_passes, again = _timed_then_stopped(ctx, server, len(off_passes))
        c = compare_speed(best_of(on_passes), best_of(off_passes),
                          probe.drift([*probes, *again]))
        if c is None:
            return Finding(first.hypothesis, Verdict.INCONCLUSIVE,
                           f"{first.evidence}; measured again with speculation on, no output "
                           f"tokens to time", basis=first.basis)
        split = speed_split(c.ratio, accepted, k, ctx.method_reference,
                            size_ratio(ctx.draft_dir, ctx.target_dir), c.ratio_range)
        second = decide_speed_split(c.verdict, split)
        numbers["again"] = {"tok_s_on": c.tok_s_on, "tok_s_off": c.tok_s_off,
                            "paired_median": c.paired_median, "drift": c.drift,
                            "split": split.to_json(), "verdict": second.verdict.value}
        if second.verdict is Verdict.CONFIRMED:
            return Finding(first.hypothesis, Verdict.CONFIRMED,
                           f"{first.evidence}; measured again with speculation on after it: "
                           f"{c.text()}, the same", first.recovered, basis=first.basis)
        return Finding(first.hypothesis, Verdict.INCONCLUSIVE,
                       f"{first.evidence}; but measured again with speculation on after it: "
                       f"{c.text()}; {second.evidence}: the two runs of one server disagree, "
                       f"so the timing does not name the draft's cost; rerun on a quiet "
                       f"machine", basis=first.basis)


class RestartAB:
    id = "restart-ab"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command to restart"
        return None if ctx.windows else "no log windows over uptime"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        d = drift(tuple(ctx.windows))
        assert ctx.launch is not None
        m, _log, err = common.measure_launch(ctx, ctx.launch, common.params(ctx), "restart")
        if m is None or m.total is None or d is None:
            return ExperimentResult(self.id, [Finding("uptime-drift", Verdict.INCONCLUSIVE,
                                                      f"restart failed: {err}")], error=err)
        fresh = common.apd(m.total)
        ev = (f"fresh server {fresh:.3f} accepted per draft; windows {d[0]:.3f} early, "
              f"{d[1]:.3f} late")
        v = Verdict.CONFIRMED if fresh > d[1] * 1.1 and fresh >= 0.9 * d[0] else \
            Verdict.NOT_REPRODUCIBLE
        size = shortfall(d[1], fresh, "a fresh restart of the same server",
                         "a fresh restart minus the late log window") if fresh > d[1] else None
        return ExperimentResult(self.id, [Finding("uptime-drift", v, ev, size=size)],
                                curves={"fresh": m.total})
