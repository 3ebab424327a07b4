"""The README's main job, timed: ``python3 -m specdoctor diagnose`` on the default lab (the lab
target drafting for itself, measured greedy and sampled at the official T=1, top_p=0.95),
exactly as a user types it.

    python benchmarks/main_job.py

Runs the command once (``--json --out DIR --no-store`` added so the answer and its report can
be kept), and writes benchmarks/results/main_job.json (commit, date, load average before and
after, wall time, the diagnosis JSON) and main_job.txt (the same header, then the report the
command wrote). The goal it checks: the root cause named with its basis in under 10 minutes on
this 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import git_commit, utc_now  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GOAL_S = 600.0


def main() -> int:
    out = Path(tempfile.mkdtemp(prefix="main-job-"))
    argv = [sys.executable, "-m", "specdoctor", "diagnose", "--json", "--out", str(out),
            "--no-store"]
    head = {"command": "python3 -m specdoctor diagnose", "commit": git_commit(),
            "date": utc_now(), "load_before": round(os.getloadavg()[0], 2),
            "machine": "x86_64, 2 cores (shared)"}
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    head.update(wall_s=round(wall, 1), load_after=round(os.getloadavg()[0], 2),
                returncode=proc.returncode)
    try:
        d = json.loads(proc.stdout)
    except ValueError:
        d = {"error": proc.stderr[-3000:]}
    head.update(root_cause=d.get("root_cause"), root_cause_basis=d.get("root_cause_basis"),
                under_goal=wall < GOAL_S)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "main_job.json").write_text(json.dumps({**head, "diagnosis": d}, indent=1) + "\n")
    report = out / "report.md"
    body = report.read_text() if report.is_file() else proc.stderr[-3000:]
    lines = [f"{head['command']}: commit {head['commit']}, {head['date']}, {head['machine']}, "
             f"load {head['load_before']} -> {head['load_after']}",
             f"wall {head['wall_s']} s (goal: under {GOAL_S:.0f} s), root cause "
             f"{head['root_cause']} (basis {head['root_cause_basis']})", "",
             "progress (stderr):", *[f"  {ln}" for ln in proc.stderr.splitlines()
                                     if ln.strip() and "Loading weights" not in ln][-40:],
             "", body]
    (RESULTS / "main_job.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:2]))
    return 0 if d.get("root_cause") else 1


if __name__ == "__main__":
    raise SystemExit(main())
