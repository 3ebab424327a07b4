"""The draft parallel-config audit on the installed vLLM, recorded for docs/experiments.md.

    python benchmarks/audit_parallel.py

Runs ``config_audit.parallel.audit_parallel`` with the lab's tiny random target as the model
(vLLM validates each layout against it) and writes benchmarks/results/audit_parallel.json with
the commit and date. No server; ~1 minute on 2 cores (importing vLLM).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    from specdoctor.experiments.config_audit import parallel
    from specdoctor.lab.models import target_model

    res = parallel.audit_parallel(target_model()).to_json()
    res["fields"] = len(res["fields"])
    res["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True,
                                   text=True, cwd=ROOT).stdout.strip()
    res["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = ROOT / "benchmarks" / "results" / "audit_parallel.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["lost_by_method"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
