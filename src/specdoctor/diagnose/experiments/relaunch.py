"""Live experiments that change the load or the launch, not the drafter: concurrency A/B on the
running server, speculation off, a plain restart."""

from __future__ import annotations

import time

from specdoctor.bench import measure as proto
from specdoctor.diagnose.experiments import common
from specdoctor.diagnose.signature import LOAD_SHARE, differs, drift
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments.base import Context, ExperimentResult, Finding, Verdict

# Speculation is slower than off when its tok/s is under this share of the spec-off tok/s.
SLOWER_SHARE = 0.95


class ConcurrencyAB:
    id = "concurrency-ab"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.url is None:
            return "no live server"
        return None if "greedy" in ctx.measured else "no greedy measurement at c=1"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        m = common.measure_url(ctx, ctx.url or "", common.params(ctx, concurrency=8))
        one = ctx.measured["greedy"].total
        if m.total is None or one is None:
            return ExperimentResult(self.id, [Finding("load-dependent", Verdict.INCONCLUSIVE,
                                                      f"c=8 measurement failed: {m.error}")],
                                    error=m.error)
        ev = (f"c=8 {common.apd(m.total):.3f} vs c=1 {common.apd(one):.3f} accepted per draft")
        v = Verdict.CONFIRMED if differs(m.total, one, LOAD_SHARE) else Verdict.EXCLUDED
        return ExperimentResult(self.id, [Finding("load-dependent", v, ev)],
                                curves={"c=1": one, "c=8": m.total})


def plain_tok_s(url: str, ctx: Context) -> float:
    """Output tok/s of the prompts at c=1, greedy, with nothing read from /metrics (a server with
    speculation off has no spec-decode counters)."""
    p = common.params(ctx)
    model = proto.served_model(url)
    proto.complete(url, model, ctx.prompts[0], p)   # warm-up
    tokens, t0 = 0, time.perf_counter()
    for i, prompt in enumerate(ctx.prompts):
        resp, _ = proto.complete(url, model, prompt, p, i)
        tokens += int((resp.get("usage") or {}).get("completion_tokens", 0))
    return tokens / max(time.perf_counter() - t0, 1e-9)


class SpecOffBaseline:
    id = "spec-off-baseline"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command"
        return None if "greedy" in ctx.measured else "no greedy measurement"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        assert ctx.launch is not None and ctx.launcher is not None
        off = ctx.launch.with_speculative_config(None).with_arg(
            "--per-request-spec-decode-metrics", None).with_port(ctx.free_port())
        log = ctx.workdir / "server-spec-off.log"
        try:
            server = ctx.launcher.start(off, log)
        except SpecdoctorError as exc:
            return ExperimentResult(self.id, [Finding("draft-overhead", Verdict.INCONCLUSIVE,
                                                      f"spec-off server did not start: {exc}")],
                                    commands=[off.shell_command()], error=str(exc))
        try:
            tok_off = plain_tok_s(server.url, ctx)
        finally:
            ctx.launcher.stop(server)
        tok_on = ctx.measured["greedy"].output_tok_s or 0.0
        ctx.data["tok_s_spec_off"] = tok_off
        ev = f"spec on {tok_on:.1f} tok/s vs off {tok_off:.1f} tok/s ({tok_on / tok_off:.2f}x)"
        v = Verdict.CONFIRMED if tok_on < SLOWER_SHARE * tok_off else Verdict.EXCLUDED
        return ExperimentResult(self.id, [Finding("draft-overhead", v, ev)],
                                {"tok_s_on": tok_on, "tok_s_off": tok_off},
                                commands=[off.shell_command()])


class RestartAB:
    id = "restart-ab"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command to restart"
        return None if ctx.data.get("windows") else "no log windows over uptime"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        d = drift(tuple(ctx.data["windows"]))
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
        return ExperimentResult(self.id, [Finding("uptime-drift", v, ev)],
                                curves={"fresh": m.total})
