"""How fast `specdoctor logs` reads a large vLLM log, beside `grep -c -F` on the same file.

Builds a log of at least --size-gb GB out of real recorded lines: the lab recordings'
server logs (tests/fixtures/vllm/*/server.log), whose SpecDecoding windows sit among the
server's ordinary start-up, request and throughput lines. Mixtures timed:

- ``production``: 200 noise lines per window, what a server logging stats every 10 s (the
  default) with access logs at ~20 requests/s writes;
- ``recorded``: the recordings' steady-state lines in their own proportion (the lab logs stats
  every 2 s), repeated;
- ``dense``: one metrics line for every 4 noise lines, a harder case than any real server;
- ``dense/4``: the same at a quarter of the size, to show memory does not grow with the file.

- ``production, distinct`` and ``recorded, distinct``: the same mixtures, but every metrics
  line carries its own counts and throughputs (formatted as vLLM formats them, on the
  recorded lines' prefixes), so nothing repeats.

The recordings hold only a handful of distinct windows, so in the first three mixtures lines
repeat. specdoctor reads a window's counts once per distinct payload (the printed counts, the
throughputs left out) and reuses them for the same payload later, so repetition flatters it
there; the ``distinct`` rows show the cost when no window repeats.

For each, the same run times `grep -c -F 'SpecDecoding metrics'` and `specdoctor logs FILE`
(table output) on the warm file, reports the ratio, and the peak resident memory of the
specdoctor process (it must not grow with the file: compare the two sizes).

    python benchmarks/logs_speed.py [--size-gb 1.0] [--keep] [--only LABEL]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = sorted((ROOT / "tests" / "fixtures" / "vllm").glob("lab-*/server.log"))


def real_lines() -> tuple[list[str], list[str], list[str]]:
    """(start-up lines, steady-state noise lines, metrics lines) of the recordings."""
    startup, noise, spec = [], [], []
    for path in RECORDINGS:
        lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("# recorded")]
        ready = next((i for i, ln in enumerate(lines) if "Application startup complete" in ln), 0)
        startup += lines[: ready + 1]
        for ln in lines[ready + 1:]:
            (spec if "SpecDecoding metrics" in ln else noise).append(ln)
    if not spec or not noise:
        raise SystemExit("no recorded lines: run scripts/record_vllm_fixtures.py first")
    return startup, noise, spec


def build(path: Path, size: int, noise_per_window: int, distinct: bool = False) -> int:
    """Write a log of at least ``size`` bytes; returns the number of metrics lines. With
    ``distinct``, each metrics line gets fresh counts (``fresh_metrics_line``)."""
    startup, noise, spec = real_lines()
    block_lines: list[str] = []
    spec_at: list[int] = []
    for i in range(max(len(spec), 64)):
        for j in range(noise_per_window):
            block_lines.append(noise[(i * noise_per_window + j) % len(noise)])
        spec_at.append(len(block_lines))
        block_lines.append(spec[i % len(spec)])
    rng = random.Random(0)
    head = ("\n".join(startup) + "\n").encode()
    written, total_windows = 0, 0
    block = b""
    with open(path, "wb") as fh:
        fh.write(head)
        written += len(head)
        while written < size:
            if distinct or not block:
                if distinct:
                    for n, at in enumerate(spec_at):
                        block_lines[at] = fresh_metrics_line(spec[n % len(spec)], rng)
                block = ("\n".join(block_lines) + "\n").encode()
            fh.write(block)
            written += len(block)
            total_windows += len(spec_at)
    return total_windows


def fresh_metrics_line(recorded: str, rng: random.Random) -> str:
    """The recorded line's prefix and k, with new counts, formatted as
    vllm/v1/spec_decode/metrics.py formats them (a fixed-length drafter: k tokens per draft)."""
    prefix = recorded[: recorded.index("SpecDecoding metrics:")]
    k = recorded.split("Per-position acceptance rate: ")[1].count(",")  # k rates, then ", Avg"
    drafts = rng.randint(5, 2000)
    per_pos, prev = [], drafts
    for _ in range(k):
        prev = rng.randint(prev // 3, prev)
        per_pos.append(prev)
    accepted, drafted = sum(per_pos), drafts * k
    return (prefix + "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: "
            "%.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d "
            "tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
            % (1 + accepted / drafts, accepted / 10 * rng.uniform(0.5, 2),
               drafted / 10 * rng.uniform(0.5, 2), accepted, drafted, ", ".join(f"{a / drafts:.3f}" for a in per_pos),
               accepted / drafted * 100))


def run_measured(argv: list[str]) -> tuple[float, str, int]:
    """Wall seconds, stdout, and the child's peak RSS in KiB (wait4's rusage of that child).

    Stdout goes to a real file: GNU grep notices a /dev/null stdout and stops at the first
    match, which would time nothing.
    """
    with tempfile.TemporaryFile() as out:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 2)
            os.execvp(argv[0], argv)
        t0 = time.perf_counter()
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return wall, text, usage.ru_maxrss


def bench(path: Path, windows: int, label: str) -> dict[str, float]:
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    grep_s, grep_out, _ = run_measured(["grep", "-c", "-F", "SpecDecoding metrics", str(path)])
    sd_s, sd_out, sd_rss = run_measured(
        [sys.executable, "-m", "specdoctor", "logs", str(path), "--windows", "0", "--no-store"])
    m = re.search(r"total of ([\d,]+) windows", sd_out)
    seen = int(m.group(1).replace(",", "")) if m else -1
    assert int(grep_out.strip()) == windows == seen, (grep_out, windows, seen)
    row = {"size_gb": size / 1e9, "windows": windows, "windows_read": seen, "grep_s": grep_s,
           "specdoctor_s": sd_s, "ratio": sd_s / grep_s, "peak_rss_mb": sd_rss / 1024}
    print(f"{label:21s} {row['size_gb']:6.2f} GB  {windows:>9,d} windows  grep {grep_s:6.2f} s  "
          f"specdoctor {sd_s:6.2f} s  ratio {row['ratio']:5.2f}x  peak RSS {row['peak_rss_mb']:6.1f} MB"
          f"  (read {seen:,d} windows)")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the logs")
    ap.add_argument("--only", action="append", help="run only this mixture (repeatable)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir=args.dir))
    _, noise, spec = real_lines()
    recorded_ratio = max(1, round(len(noise) / len(spec)))
    print(f"recorded lines: {len(noise)} noise, {len(spec)} metrics "
          f"(≈{recorded_ratio} noise lines per window in the recordings)")
    try:
        for label, per_window, size, distinct in [
            ("production", 200, args.size_gb, False),
            ("recorded", recorded_ratio, args.size_gb, False),
            ("dense", 4, args.size_gb, False),
            ("dense/4", 4, args.size_gb / 4, False),  # memory must not grow with the file
            ("production, distinct", 200, args.size_gb, True),
            ("recorded, distinct", recorded_ratio, args.size_gb, True),
        ]:
            if args.only and label not in args.only:
                continue
            path = tmp / f"{label.replace('/', '_').replace(', ', '_')}.log"
            windows = build(path, int(size * 1e9), per_window, distinct)
            bench(path, windows, label)
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep:
            for p in tmp.glob("*"):
                p.unlink()
            tmp.rmdir()


if __name__ == "__main__":
    main()
