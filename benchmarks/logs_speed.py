"""How fast `specdoctor logs` reads a large vLLM log, beside `grep -c -F` on the same file.

The logs are generated the way a production vLLM server writes them, so that no metrics line
repeats another (a reader that caches whole payloads gains nothing it would not gain on a real
server):

- one ``SpecDecoding metrics`` line per 10 s stats interval (vLLM's default), with the
  interval's own elapsed time (10 s plus scheduling jitter) and an advancing timestamp;
- drafts per interval follow the load: a slow daily swing times bursts (a Poisson draw around
  it), from tens to tens of thousands; idle intervals print nothing, as vLLM prints nothing;
- acceptance drifts (an AR(1) walk of the per-position conditional acceptance), and each
  interval's per-position counts are binomial draws down the prefix (position i is accepted
  only if 0..i-1 were), so counts, rates, mean acceptance length and both throughputs differ
  in every line; every figure is formatted as vllm/v1/spec_decode/metrics.py formats it;
- between two metrics lines, the server's other lines (the lab recordings' own access-log,
  engine-throughput and request lines, tests/fixtures/vllm/*/server.log) at production
  density: 200 per interval, ~20 requests/s of access logs;
- a start-up head naming the method (``speculative_config=SpeculativeConfig(method=...)``).

Mixtures: ``eagle k=3`` (fixed-length drafts, the headline row), ``ngram k=5`` (variable-length
drafts: the draft count is recovered, or bounded, from the printed mean and rates), and
``eagle k=3, dense`` (4 other lines per interval: far more metrics lines than any server writes).

Each run times `grep -c -F 'SpecDecoding metrics'` and `specdoctor logs FILE` (table output)
back to back on the same warm file and takes their ratio; --runs runs give min/median/max of
the times and of the ratio, in wall time and in CPU time (user + system, the child's own and
its grep's: steadier than wall time on a shared machine). The specdoctor timed is this
checkout's (src/ first on PYTHONPATH), its modules byte-compiled first as an install compiles
them. Beside it, `specdoctor logs` on the first 20 windows of the same file gives the fixed
cost (interpreter, imports, the bootstrap interval) that any file pays, and the rest of the CPU
time divided by the windows gives the cost of one window. The generator adds up, as it writes, the counts it printed; the
totals `specdoctor` reads (``read_logs``, outside the timing) must equal them exactly.
(results/logs_speed_bulk_vs_plain.txt: the payload-table reader this replaced, against the
plain reader, on these logs.)

    python benchmarks/logs_speed.py [--size-gb 0.25] [--runs 3] [--only LABEL] [--keep]
"""

from __future__ import annotations

import argparse
import compileall
import math
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = sorted((ROOT / "tests" / "fixtures" / "vllm").glob("lab-*/server.log"))
INTERVAL_S = 10.0
STARTUP = ("(EngineCore pid=101) INFO 11-29 00:00:00 [core.py:133] Initializing a V1 LLM engine "
           "(v0.32.0) with config: model='m', speculative_config=SpeculativeConfig(method='{m}', "
           "model='d', num_spec_tokens={k}), tokenizer='m'")


def recorded_noise() -> list[str]:
    """The recordings' lines after start-up that are not metrics lines."""
    noise = []
    for path in RECORDINGS:
        lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("# recorded")]
        ready = next((i for i, ln in enumerate(lines) if "Application startup complete" in ln), 0)
        noise += [ln for ln in lines[ready + 1:] if "metrics:" not in ln]
    if not noise:
        raise SystemExit("no recorded lines in tests/fixtures/vllm/*/server.log")
    return noise


@dataclass
class Truth:
    """What the generator printed, added up independently of specdoctor."""

    windows: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)


class Server:
    """The state of a simulated server from one stats interval to the next."""

    def __init__(self, rng: random.Random, method: str, k: int) -> None:
        self.rng, self.method, self.k = rng, method, k
        self.t = datetime(2026, 11, 29, tzinfo=timezone.utc)
        self.step = 0
        self.logit = [1.2 - 0.35 * i for i in range(k)]  # conditional acceptance, per position

    def _load(self) -> float:
        """Mean drafts per interval: a daily swing, with bursts."""
        day = 0.5 + 0.45 * math.sin(2 * math.pi * self.step / 8640)
        burst = self.rng.lognormvariate(0, 0.6)
        return 40 + 9000 * day * burst

    def window(self, truth: Truth) -> str | None:
        rng, k = self.rng, self.k
        self.step += 1
        elapsed = INTERVAL_S + abs(rng.gauss(0, 0.05))
        self.t += timedelta(seconds=elapsed)
        self.logit = [0.98 * x + 0.02 * (1.2 - 0.35 * i) + rng.gauss(0, 0.05)
                      for i, x in enumerate(self.logit)]
        if rng.random() < 0.03:
            return None  # idle: vLLM logs nothing
        drafts = max(1, _poisson(rng, self._load()))
        per_pos, prev = [], drafts
        for x in self.logit:
            prev = _binomial(rng, prev, 1 / (1 + math.exp(-x)))
            per_pos.append(prev)
        accepted = sum(per_pos)
        if self.method == "ngram":
            # a draft carries 1..k tokens: its accepted prefix, plus the rejected token unless
            # all k were accepted, plus any after it
            drafted = rng.randint(accepted + drafts - per_pos[-1], k * drafts)
        else:
            drafted = k * drafts
        truth.windows += 1
        truth.drafts += drafts
        truth.draft_tokens += drafted
        truth.accepted += accepted
        truth.per_position = [a + b for a, b in zip(truth.per_position or [0] * k, per_pos)]
        rates = ", ".join(f"{a / drafts:.3f}" for a in per_pos)
        return (f"(APIServer pid=7541) INFO {self.t:%m-%d %H:%M:%S} [metrics.py:120] "
                "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f "
                "tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d "
                "tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
                % (1 + accepted / drafts, accepted / elapsed, drafted / elapsed, accepted,
                   drafted, rates, 100 * accepted / drafted))


def _poisson(rng: random.Random, lam: float) -> int:
    return max(0, round(rng.gauss(lam, math.sqrt(lam))))  # lam is large: normal approximation


def _binomial(rng: random.Random, n: int, p: float) -> int:
    if n < 50:
        return sum(rng.random() < p for _ in range(n))
    return min(n, max(0, round(rng.gauss(n * p, math.sqrt(n * p * (1 - p))))))


def build(path: Path, size: int, method: str, k: int, noise_per_window: int, seed: int = 0) -> Truth:
    """Write a log of at least ``size`` bytes; returns what its metrics lines add up to."""
    rng = random.Random(seed)
    noise = recorded_noise()
    server = Server(rng, method, k)
    truth = Truth()
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        written += fh.write(STARTUP.format(m=method, k=k) + "\n")
        at = 0
        while written < size:
            chunk = []
            for _ in range(noise_per_window):
                chunk.append(noise[at % len(noise)])
                at += 1
            line = server.window(truth)
            if line is not None:
                chunk.append(line)
            written += fh.write("\n".join(chunk) + "\n")
    return truth


def run_measured(argv: list[str]) -> tuple[float, float, str, int]:
    """Wall seconds, CPU seconds (user + system), stdout, and the child's peak RSS in KiB
    (wait4's rusage of that child, its own children included). On a shared machine the CPU
    seconds vary less.

    Stdout goes to a real file: GNU grep notices a /dev/null stdout and stops at the first
    match, which would time nothing.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryFile() as out:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 2)
            os.execvpe(argv[0], argv, env)
        t0 = time.perf_counter()
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime, text, usage.ru_maxrss


def check_totals(path: Path, truth: Truth) -> str:
    """specdoctor's totals against the generator's own sums (exact), outside the timing."""
    sys.path.insert(0, str(ROOT / "src"))
    from specdoctor.sources.logs import read_logs

    t = read_logs([path], keep_windows=False).total
    assert (t.draft_tokens, t.accepted_tokens) == (truth.draft_tokens, truth.accepted), t
    # Above 1000 drafts a window's 3-decimal rate covers several counts: its per-position
    # counts are the nearest to rate x drafts (the window says so), each within 0.0005 x drafts.
    pos = t.accepted_per_position
    err = max((abs(a - b) for a, b in zip(pos, truth.per_position)), default=0) if pos else None
    if pos is not None:
        assert err <= 0.0005 * truth.drafts + truth.windows, (pos, truth.per_position)
        assert sum(pos) == truth.accepted
    pos_note = "per-position " + ("not read" if pos is None else
                                  f"within {err:,d} ({err / truth.drafts:.1e} of drafts)")
    if t.drafts is not None:
        assert t.drafts == truth.drafts, (t.drafts, truth.drafts)
        return f"drafts, draft and accepted tokens exact; {pos_note}"
    lo, hi = t.drafts_range or (None, None)
    assert lo is not None and hi is not None and lo <= truth.drafts <= hi, (t.drafts_range, truth.drafts)
    return (f"draft and accepted tokens exact; drafts in [{lo:,d}, {hi:,d}] "
            f"(true {truth.drafts:,d}); {pos_note}")


def head_windows(path: Path, n: int) -> Path:
    """The file's lines up to its n-th metrics line, beside it."""
    out = path.with_suffix(".head.log")
    seen = 0
    with open(path, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for line in src:
            dst.write(line)
            seen += "SpecDecoding metrics:" in line
            if seen == n:
                break
    return out


SPECDOCTOR = [sys.executable, "-m", "specdoctor", "logs"]
SPECDOCTOR_ARGS = ["--windows", "0", "--no-store"]


def specdoctor_grep(path: Path) -> list[str]:
    """The grep command line specdoctor runs on a vLLM log file, in its locale."""
    sys.path.insert(0, str(ROOT / "src"))
    from specdoctor.sources.scan import _grep_argv
    from specdoctor.sources.vllm_log import MARKERS

    return ["env", "LC_ALL=C", *_grep_argv("grep", str(path), tuple(m.encode() for m in MARKERS))]


def where_the_time_goes(path: Path) -> tuple[float, float]:
    """CPU seconds, in this process (imports done, numpy loaded): the vLLM reader alone
    (grep's output parsed, counts recovered, windows built), and ``read_logs`` (the same, plus
    the totals and the bootstrap interval); the least of three tries each."""
    sys.path.insert(0, str(ROOT / "src"))
    import numpy  # noqa: F401  (loaded before timing, as the start-up figure includes it)

    from specdoctor.sources.base import ReadOptions
    from specdoctor.sources.logs import read_logs
    from specdoctor.sources.registry import source
    from specdoctor.sources.scan import open_input

    def cpu(f: object) -> float:
        best = math.inf
        for _ in range(3):
            t = time.process_time()
            f()  # type: ignore[operator]
            best = min(best, time.process_time() - t)
        return best

    reader = cpu(lambda: source("vllm").read(open_input(str(path)), ReadOptions(), lambda w: None))
    whole = cpu(lambda: read_logs([path], keep_windows=False, last_windows=1))
    return reader, whole


def bench(path: Path, truth: Truth, label: str, runs: int) -> dict[str, object]:
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    head = head_windows(path, 20)
    load_start = os.getloadavg()[0]
    own_grep = specdoctor_grep(path)
    grep_t, grep_cpu, sd_t, sd_cpu, ratios, cpu_ratios, rss, fixed_cpu, own_cpu = (
        [] for _ in range(9))
    for _ in range(runs):
        g, g_cpu, g_out, _ = run_measured(["grep", "-c", "-F", "SpecDecoding metrics", str(path)])
        s, s_cpu, s_out, s_rss = run_measured([*SPECDOCTOR, str(path), *SPECDOCTOR_ARGS])
        fixed_cpu.append(run_measured([*SPECDOCTOR, str(head), *SPECDOCTOR_ARGS])[1])
        own_cpu.append(run_measured(own_grep)[1])
        m = re.search(r"total of ([\d,]+) windows", s_out)
        seen = int(m.group(1).replace(",", "")) if m else -1
        assert int(g_out.strip()) == truth.windows == seen, (g_out, truth.windows, seen)
        grep_t.append(g)
        grep_cpu.append(g_cpu)
        sd_t.append(s)
        sd_cpu.append(s_cpu)
        ratios.append(s / g)
        cpu_ratios.append(s_cpu / max(g_cpu, 1e-3))
        rss.append(s_rss / 1024)
    load_end = os.getloadavg()[0]
    head.unlink()
    check = check_totals(path, truth)

    def mmm(xs: list[float], fmt: str) -> str:
        return "/".join(fmt % x for x in (min(xs), statistics.median(xs), max(xs)))

    reader, whole = where_the_time_goes(path)
    print(f"{label:22s} {size / 1e9:5.2f} GB {truth.windows:>8,d} windows  "
          f"grep {mmm(grep_t, '%.2f')} s  specdoctor {mmm(sd_t, '%.2f')} s  "
          f"ratio {mmm(ratios, '%.2f')}x  (CPU time ratio {mmm(cpu_ratios, '%.2f')}x)  "
          f"peak RSS {max(rss):.0f} MB\n"
          f"{'':22s} CPU s: grep {mmm(grep_cpu, '%.2f')}, specdoctor {mmm(sd_cpu, '%.2f')}; of "
          f"which start-up {statistics.median(fixed_cpu):.2f} (a 20-window log), reading "
          f"{reader:.2f} ({reader / truth.windows * 1e6:.1f} us a window), totals and interval "
          f"{whole - reader:.2f}, its grep pass {statistics.median(own_cpu):.2f}; load average "
          f"{load_start:.1f} -> "
          f"{load_end:.1f}\n"
          f"{'':22s} totals: {check}", flush=True)
    return {"label": label, "ratios": ratios}


def startup(runs: int) -> None:
    """CPU seconds of `specdoctor logs --help` (its imports), of a bare interpreter, and of an
    interpreter importing numpy (which the bootstrap interval of a total needs)."""
    def cpu(argv: list[str]) -> str:
        xs = [run_measured(argv)[1] for _ in range(max(runs, 5))]
        return f"{min(xs):.2f}/{statistics.median(xs):.2f}/{max(xs):.2f}"

    print(f"start-up, CPU s (min/median/max over {max(runs, 5)} runs): specdoctor logs --help "
          f"{cpu([*SPECDOCTOR, '--help'])}, python -c pass {cpu([sys.executable, '-c', 'pass'])}, "
          f"python -c 'import numpy' {cpu([sys.executable, '-c', 'import numpy'])}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=0.25)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the logs")
    ap.add_argument("--only", action="append", help="run only this mixture (repeatable)")
    args = ap.parse_args()
    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    from _provenance import git_commit, machine

    load = os.getloadavg()[0]
    print(f"logs speed ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {git_commit()}, "
          f"{machine()}, Python {platform.python_version()}, load average {load:.1f} at start; "
          f"min/median/max over {args.runs} runs)")
    print("python benchmarks/logs_speed.py " + " ".join(sys.argv[1:]))
    # as an install compiles them (this machine may run with PYTHONDONTWRITEBYTECODE set)
    compileall.compile_dir(str(ROOT / "src" / "specdoctor"), quiet=1)
    startup(args.runs)
    tmp = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        for label, method, k, per_window in [
            ("eagle k=3", "eagle", 3, 200),
            ("ngram k=5", "ngram", 5, 200),
            ("eagle k=3, dense", "eagle", 3, 4),
        ]:
            if args.only and label not in args.only:
                continue
            path = tmp / (re.sub(r"[^\w]+", "_", label) + ".log")
            truth = build(path, int(args.size_gb * 1e9), method, k, per_window)
            bench(path, truth, label, args.runs)
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep:
            for p in tmp.glob("*"):
                p.unlink()
            tmp.rmdir()


if __name__ == "__main__":
    main()
