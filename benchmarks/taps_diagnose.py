"""The taps experiment of ``diagnose`` on real vLLM: the healthy lab and the draft-heads-lost
fault, one relaunch each, with what each costs and the per-head errors it sees.

    python benchmarks/taps_diagnose.py [--keep DIR]

Each case is the lab's ``--method draft_model`` launch (the target as its own draft, k=4), as a
plain ``LaunchSpec``; the fault case is the same launch with the fault's runtime patch on its
PYTHONPATH. The experiment (``specdoctor.experiments.taps.experiment``) relaunches it with the
taps pack added, sends 2 prompts, and compares every tapped draft attention call with fp64,
head by head. Recorded: verdict, evidence, the summary (largest relative error per head,
cells off the tolerance), the experiment's wall time and the number of tap records.
The healthy case's largest cell error is the float32 rounding the tolerance is set against.
Writes benchmarks/results/taps_diagnose.json and .txt. Not a test: two boots.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def run_case(fault: str | None, work: Path) -> dict[str, Any]:
    from specdoctor.bench.prompts import take
    from specdoctor.experiments import common
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.taps import experiment as taps
    from specdoctor.lab import lab
    from specdoctor.launch import Servers, free_port

    launch = lab.lab_spec("draft_model", 4, free_port(), fault=fault)
    s = common.settings(launch)
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(workdir=work, launch=launch, launcher=Servers(), method=s.method,
                  k=s.k, prompts=tuple(take("code", 8)),
                  progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    ctx.suite = "code"
    exp = taps.Experiment()
    res = exp.run(ctx, (taps.HID, taps.PARALLEL))
    return {"case": fault or "healthy", "wall_s": round(res.wall_s, 1), "error": res.error,
            "findings": [f.to_json() for f in res.findings], "numbers": res.numbers}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy each case's tap records here (to record test fixtures)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from _provenance import git_commit, load, machine, utc_now

    info = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
            "load_at_start": load(),
            "protocol": {"launch": "lab draft_model (target as its own draft), k=4, float32",
                         "prompts": "2 code prompts, 16 tokens, greedy, one warm-up request"}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="taps-diagnose-") as tmp:
        for fault in (None, "draft-heads-lost"):
            name = fault or "healthy"
            print(f"[taps_diagnose] {name} ...", file=sys.stderr, flush=True)
            rows.append(run_case(fault, Path(tmp) / name))
            if a.keep is not None and rows[-1]["numbers"].get("tapdir"):
                shutil.copytree(rows[-1]["numbers"]["tapdir"], a.keep / name, dirs_exist_ok=True)
            print(json.dumps(rows[-1])[:800], file=sys.stderr, flush=True)
    for r in rows:
        r["numbers"].pop("tapdir", None)
    out = {**info, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "taps_diagnose.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [f"taps_diagnose: commit {info['commit']}, {info['date']}, {info['machine']}",
             info["protocol"]["launch"] + "; " + info["protocol"]["prompts"], ""]
    for r in rows:
        s = r["numbers"].get("summary") or {}
        errs = s.get("max_rel_err_per_head")
        lines.append(f"{r['case']}: experiment {r['wall_s']} s, {r['numbers'].get('records')} "
                     f"records, accepted per draft with taps "
                     f"{r['numbers'].get('accepted_per_draft_with_taps')}")
        lines.append(f"  max rel err per head {errs}; cells off {s.get('cells_off')} of "
                     f"{s.get('cells')} (tolerance {s.get('tolerance')})")
        for f in r["findings"]:
            lines.append(f"  {f['hypothesis']}: {f['verdict']}: {f['evidence'][:400]}")
    (RESULTS / "taps_diagnose.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
