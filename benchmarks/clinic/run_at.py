"""Run the clinic as it was at an earlier commit, case by case, over several sittings.

A full run at one commit takes hours on 2 cores. This checks the commit out in a temporary git
worktree, runs there, with that commit's own code and cases, every case that no clean run at
that commit has answered yet (``benchmarks/results/clinic.json`` of this checkout says which),
one ``run.py --cases NAME`` at a time, and after each case copies the new run into this
checkout's clinic.json. Stopped at any point, it loses at most the case it was running; run it
again to go on. The worktree is removed at the end.

    python3 benchmarks/clinic/run_at.py e5f66f1 [--cases a,b] [--budget 10] [--again]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "clinic.json"


def answered(data: dict, commit: str) -> set[str]:
    """Cases a clean run at ``commit`` answered (pure)."""
    return {r["case"] for run in data["runs"] if run.get("commit") == commit and run.get("clean")
            for r in run["rows"] if "right" in r}


def merged(into: dict, other: dict) -> tuple[dict, int]:
    """``into`` with the runs of ``other`` it lacks (a run is known by its commit and date; one
    it holds with fewer rows is replaced); and how many runs were added or replaced (pure)."""
    runs = list(into["runs"])
    where = {(r.get("commit"), r.get("date")): i for i, r in enumerate(runs)}
    n = 0
    for r in other["runs"]:
        if not r.get("rows"):
            continue
        key = (r.get("commit"), r.get("date"))
        if key not in where:
            where[key] = len(runs)
            runs.append(r)
            n += 1
        elif len(r["rows"]) > len(runs[where[key]]["rows"]):
            runs[where[key]] = r
            n += 1
    return {**into, "runs": runs}, n


def _git(*args: str, cwd: Path = ROOT) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commit")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all of "
                                                "that commit's cases)")
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--again", action="store_true",
                    help="run the chosen cases even where a clean run at that commit answered "
                         "them (a second sample, to tell the machine's noise from a change)")
    a = ap.parse_args()
    commit = _git("rev-parse", "--short", a.commit)
    tree = Path(tempfile.mkdtemp(prefix="clinic-at-")) / commit
    _git("worktree", "add", "--detach", str(tree), commit)
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    try:
        names = json.loads(subprocess.run(
            [sys.executable, "-c", "import json, sys; sys.path.insert(0, 'benchmarks/clinic'); "
             "import run; print(json.dumps([c.name for c in run.CASES]))"],
            cwd=tree, env=env, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        chosen = [n for n in names if not a.cases or n in a.cases.split(",")]
        for name in chosen:
            data = json.loads(RESULTS.read_text())
            if name in answered(data, commit) and not a.again:
                continue
            print(f"clinic at {commit}: {name} …", file=sys.stderr, flush=True)
            theirs = tree / "benchmarks" / "results" / "clinic.json"
            theirs.write_text(json.dumps(data, indent=1) + "\n")
            subprocess.run([sys.executable, "benchmarks/clinic/run.py", "--cases", name,
                            "--budget", str(a.budget)], cwd=tree, env=env)
            new, n = merged(json.loads(RESULTS.read_text()), json.loads(theirs.read_text()))
            RESULTS.write_text(json.dumps(new, indent=1) + "\n")
            print(f"clinic at {commit}: {name}: {n} run(s) copied", file=sys.stderr, flush=True)
        left = [n for n in chosen if n not in answered(json.loads(RESULTS.read_text()), commit)]
        print(json.dumps({"commit": commit, "cases": len(chosen), "left": left}))
    finally:
        _git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tree.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
