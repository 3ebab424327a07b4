"""The oracle on each lab fault of EAGLE3, DFlash and MTP: fed the served (faulty) config it
must predict what the engine measured; fed the trained config it gives the counterfactual.

That pair is what ``diagnose`` uses to confirm ``draft-config-mismatch``: the engine reaches
what the served config allows (no engine loss), and the trained config would reach more.

For each fault: ``oracle.predict`` (greedy, 16 code prompts x 64 tokens, the k the fault is
served at) on the served pair and on the healthy pair of the same budget. Where the fault
clinic's results (benchmarks/results/drafters_faults.json) hold a measured row for the very
same served weights (the same content-named directories), the prediction is set beside the
measured counts and ``equal`` says whether they agree count for count.

    python benchmarks/oracle_faults.py [--budget full|ci] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
CLINIC = ROOT / "benchmarks" / "results" / "drafters_faults.json"


def counts(p: Any) -> dict[str, Any]:
    return {"drafts": p.drafts, "accepted_per_position": list(p.accepted_per_position),
            "per_position": [round(x, 4) for x in p.per_position],
            "mean_acceptance_length": round(p.mean_acceptance_length, 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", choices=["full", "ci"], default="full")
    ap.add_argument("-n", "--num-prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()

    from specdoctor import oracle
    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters, faults, lab
    from specdoctor.lab.drafters import targets

    measured = {}
    if CLINIC.is_file():
        for r in json.loads(CLINIC.read_text()).get("rows", []):
            if r.get("fault") and r.get("measured"):
                measured[(r["target"], r["draft"], r["k"])] = r["measured"]
    prompts = take("code", a.num_prompts)
    tok = targets.tokenizer_dir()
    rows = []
    for f in faults.FAULTS.values():
        if f.method not in lab.DRAFTER_METHODS:
            continue  # a runtime patch of the engine: nothing for the offline oracle to predict
        k = lab.default_k(f.method, None, f.id)
        served = faults.serve(f.method, fault=f.id, budget=a.budget)
        healthy = drafters.serve(f.method, budget=a.budget)
        t0 = time.perf_counter()
        faulty = oracle.predict(served.target, served.draft, f.method, k, prompts,
                                max_tokens=a.max_tokens, tokenizer=tok)
        trained = oracle.predict(healthy.target, healthy.draft, f.method, k, prompts,
                                 max_tokens=a.max_tokens, tokenizer=tok)
        row: dict[str, Any] = {
            "fault": f.id, "root_cause": f.root_cause, "method": f.method, "k": k,
            "served": {"target": served.target.name,
                       "draft": served.draft.name if served.draft else None},
            "oracle_served_config": counts(faulty), "oracle_trained_config": counts(trained),
            "seconds": round(time.perf_counter() - t0, 1)}
        m = measured.get((row["served"]["target"], row["served"]["draft"], k))
        if m is not None:
            row["engine_measured"] = {"drafts": m["drafts"],
                                      "accepted_per_position": m["accepted_per_position"]}
            row["equal"] = (m["drafts"], list(m["accepted_per_position"])) == (
                faulty.drafts, list(faulty.accepted_per_position))
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "commit": commit,
           "budget": a.budget, "prompts": a.num_prompts, "max_tokens": a.max_tokens,
           "python": platform.python_version(),
           "note": "engine_measured appears only where the fault clinic measured the same "
                   "served weights (same content-named directories)",
           "rows": rows}
    path = a.out or ROOT / "benchmarks" / "results" / f"oracle_faults_{a.budget}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(path)


if __name__ == "__main__":
    main()
