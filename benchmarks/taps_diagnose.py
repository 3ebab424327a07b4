"""The taps experiment of ``diagnose`` on real vLLM, for every model-based drafter of the lab:
healthy and with the heads-lost runtime patch, one relaunch each, with what each costs and the
per-head errors it sees.

    python benchmarks/taps_diagnose.py [--cases NAME,...] [--keep DIR]

Cases (``CASES``): the lab's ``draft_model`` launch (the random target as its own draft, k=4),
EAGLE3 (Llama target) and DFlash (Qwen3 target, non-causal drafter) with the ``ci``-budget
trained drafters at their trained k, each healthy and with its heads-lost fault
(``draft-heads-lost``, ``eagle3-heads-lost``, ``dflash-heads-lost``: the lab's runtime patch
that zeroes 3 of 4 draft attention heads past the first quarter of each sequence, finding the
draft's layers from the proposer); ``dflash-window`` (a sliding-window drafter: the fault is in
the mask the config asks for, the kernel computes that mask correctly, so the taps must exclude
lost heads); and a healthy MTP drafter. Each case is a plain ``LaunchSpec``; the experiment
(``specdoctor.experiments.taps.experiment``) relaunches it with the taps pack added, sends 2
prompts, and compares every tapped draft attention call with fp64 over its own pages, with the
layer's own mask, head by head. Recorded per case: verdict, evidence, the summary (largest
relative error per head, cells off the tolerance), the layers tapped, the experiment's wall time,
the number of tap records and the load average before and after. Writes
benchmarks/results/taps_diagnose.json and .txt. Not a test: one boot per case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# (case name, lab method, fault or None)
CASES = (("draft_model", "draft_model", None),
         ("draft_model+heads-lost", "draft_model", "draft-heads-lost"),
         ("eagle3", "eagle3", None), ("eagle3+heads-lost", "eagle3", "eagle3-heads-lost"),
         ("dflash", "dflash", None), ("dflash+heads-lost", "dflash", "dflash-heads-lost"),
         ("dflash-window", "dflash", "dflash-window"), ("mtp", "mtp", None))
BUDGET = "ci"


def run_case(method: str, fault: str | None, work: Path) -> dict[str, Any]:
    from specdoctor.bench.prompts import take
    from specdoctor.experiments import common
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.taps import experiment as taps
    from specdoctor.lab import lab
    from specdoctor.launch import Servers, free_port

    k = 4 if method == "draft_model" else None
    launch = lab.lab_spec(method, k, free_port(), fault=fault, budget=BUDGET)
    s = common.settings(launch)
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(workdir=work, launch=launch, launcher=Servers(timeout_s=1500),
                  method=s.method, k=s.k, prompts=tuple(take("code", 8)),
                  progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    ctx.suite = "code"
    load0 = os.getloadavg()[0]
    res = taps.Experiment().run(ctx, (taps.HID, taps.PARALLEL))
    tapdir = Path(res.numbers.get("tapdir", work / "none"))
    layers = sorted({f.name.split(".r")[0].removeprefix("attn.")
                     for f in tapdir.glob("*.safetensors")})
    return {"method": method, "fault": fault, "k": s.k, "wall_s": round(res.wall_s, 1),
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)], "error": res.error,
            "layers_tapped": layers, "findings": [f.to_json() for f in res.findings],
            "numbers": res.numbers}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES),
                    help="comma-separated case names (default: all)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy each case's tap records here (to record test fixtures)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from _provenance import git_commit, load, machine, utc_now

    wanted = [c for c in CASES if c[0] in a.cases.split(",")]
    info = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
            "load_at_start": load(),
            "protocol": {"launch": f"lab servers, float32: draft_model (the random target as its "
                                   f"own draft, k=4); eagle3, dflash, mtp: the {BUDGET}-budget "
                                   f"trained drafters at their trained k",
                         "prompts": "2 code prompts, 16 tokens, greedy, one warm-up request"}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="taps-diagnose-") as tmp:
        for name, method, fault in wanted:
            print(f"[taps_diagnose] {name} ...", file=sys.stderr, flush=True)
            rows.append({"case": name, **run_case(method, fault, Path(tmp) / name)})
            if a.keep is not None and rows[-1]["numbers"].get("tapdir"):
                shutil.copytree(rows[-1]["numbers"]["tapdir"], a.keep / name, dirs_exist_ok=True)
            print(json.dumps(rows[-1])[:800], file=sys.stderr, flush=True)
    for r in rows:
        r["numbers"].pop("tapdir", None)
    out = {**info, "load_at_end": load(), "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "taps_diagnose.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [f"taps_diagnose: commit {info['commit']}, {info['date']}, {info['machine']}, "
             f"load {info['load_at_start']} -> {out['load_at_end']}",
             info["protocol"]["launch"] + "; " + info["protocol"]["prompts"], ""]
    for r in rows:
        s = r["numbers"].get("summary") or {}
        errs = s.get("max_rel_err_per_head")
        lines.append(f"{r['case']} (k={r['k']}): experiment {r['wall_s']} s (load "
                     f"{r['load'][0]} -> {r['load'][1]}), {r['numbers'].get('records')} records of "
                     f"{', '.join(r['layers_tapped']) or 'no layer'}, accepted per draft with taps "
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
