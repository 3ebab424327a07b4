"""User kernels through `kernels check`: a correct paged kernel, one that aligns causality
top-left, and five planted bugs, on the default suite (CPU).

The kernels are the three written from scratch in torch for the tests
(tests/experiments/kernels/paged_kernels.py), loaded as a user's ``--impl MOD:FN``: each is
checked against the model's mask (bottom-right causal, |q - k| < W), its ``mask_convention``
setting only how the window is passed. Recorded per kernel: the cases it fails, the cause named
for them (the usual mask mistake its output matches, or none), and the whole run's wall time.

    PYTHONPATH=src python benchmarks/kernels_user.py

Writes benchmarks/results/kernels_user.json and .txt.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KERNELS = ("bottom_right", "bottom_right_w", "top_left", "window_wide", "no_block_table", "gqa",
           "chunk_positions", "stale_key")


def main() -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    sys.path.insert(0, str(ROOT / "tests" / "experiments" / "kernels"))
    from _provenance import git_commit, load, machine, utc_now

    from specdoctor.experiments.kernels.adapters import load as load_adapters
    from specdoctor.experiments.kernels.cases import load_suite
    from specdoctor.experiments.kernels.run import check

    info = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
            "load_at_start": load()}
    cases = load_suite("default")
    names = [f"paged_kernels:{k}" for k in KERNELS]
    report = check(cases, load_adapters(names, "cpu"), "cpu", "default")
    info["load_at_end"] = load()
    rows = []
    for name in names:
        failed = [x for x in report.results if x.impl == name and not x.ok]
        causes = Counter(x.cause.split(":")[0] if x.cause else "none named" for x in failed)
        rows.append({"kernel": name, "cases": len(cases), "failed": len(failed),
                     "failed_cases": [x.case for x in failed], "causes": dict(causes)})
    out = {**info, "suite": "default", "control_caught": report.control_caught,
           "total_s": round(report.total_seconds, 1), "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "kernels_user.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [f"kernels_user: commit {info['commit']}, {info['date']}, {info['machine']}, "
             f"load {info['load_at_start']} -> {info['load_at_end']}",
             f"default suite ({len(cases)} cases), CPU, run {out['total_s']} s, negative control "
             f"{'caught' if report.control_caught else 'NOT caught'}", ""]
    for r in rows:
        causes = ", ".join(f"{k} {v}" for k, v in r["causes"].items()) or "-"
        lines.append(f"{r['kernel']:32s} fails {r['failed']:2d} of {r['cases']}; causes: {causes}")
    (RESULTS / "kernels_user.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
