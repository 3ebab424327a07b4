"""How long a lab server takes to boot with vLLM's CPU compile backend (inductor) and with the
eager backend vLLM's own CPU CI uses (``VLLM_CPU_CI_ENV=1``: dynamo traced once, then run
eagerly), and whether acceptance is the same.

    python benchmarks/boot_backend.py [--methods draft_model,eagle3] [--repeats 2]

For each method, the lab's server (``specdoctor lab up --method M --train-budget ci``) is
booted alternately under the two backends, ``--repeats`` times each, in a fresh compile cache
every time; each boot is timed to ready, measured greedy on 8 code prompts x 48 tokens, and
stopped. The two backends alternate so the machine's drift falls on both alike; the ratio is
eager over inductor within the run. The test suite boots its lab servers eagerly
(tests/conftest.py) on the strength of these figures.

Writes benchmarks/results/boot_backend.{json,txt} (commit, date, load).
Not a test: four boots per method, several minutes each on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import git_commit, utc_now

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BACKENDS = {"inductor": {}, "eager": {"VLLM_CPU_CI_ENV": "1"}}


def one_boot(method: str, env: dict[str, str], n: int, max_tokens: int) -> dict[str, Any]:
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port

    spec = labmod.lab_spec(method, None, free_port(), budget="ci")
    spec = spec.with_cache_root(tempfile.mkdtemp(prefix="boot-cache-")).with_env(env)
    t0 = time.monotonic()
    try:
        labmod.up(spec, timeout_s=1200)
        boot = time.monotonic() - t0
        t1 = time.monotonic()
        m = proto.run(spec.url, take("code", n), proto.MeasureParams(
            num_prompts=n, max_tokens=max_tokens, temperature=0.0))
        measure = time.monotonic() - t1
    finally:
        labmod.down(spec.port)
    tot = m.total
    return {"boot_s": round(boot, 1), "measure_s": round(measure, 1),
            "load": round(os.getloadavg()[0], 2), "error": m.error,
            "accepted_per_draft": None if tot is None else round(tot.accepted_per_draft or 0, 4),
            "per_position": None if tot is None else [round(x, 4) for x in tot.per_position]}


def summary(xs: list[float]) -> str:
    return f"min {min(xs):.1f} / median {statistics.median(xs):.1f} / max {max(xs):.1f}"


def text(head: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    title = (f"lab boot: inductor vs eager backend (commit {head['commit']}, {head['date']}, "
             f"{head['machine']}, load before {head['load_before']}); {head['n']} code prompts "
             f"x {head['max_tokens']} tokens greedy after each boot")
    out = [title, ""]
    for method in dict.fromkeys(r["method"] for r in rows):
        out.append(f"{method}:")
        by = {b: [r for r in rows if r["method"] == method and r["backend"] == b]
              for b in BACKENDS}
        for b, rs in by.items():
            if not rs:
                continue
            apd = sorted({r["accepted_per_draft"] for r in rs}, key=str)
            out.append(f"  {b:9s} boot s {summary([r['boot_s'] for r in rs])}; measure s "
                       f"{summary([r['measure_s'] for r in rs])}; accepted per draft "
                       f"{', '.join(map(str, apd))}")
        if by["inductor"] and by["eager"]:
            ratios = [e["boot_s"] / i["boot_s"] for i, e in zip(by["inductor"], by["eager"])]
            out.append("  eager / inductor boot, pair by pair: "
                       + ", ".join(f"{x:.2f}" for x in ratios))
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="draft_model,eagle3")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args(argv)
    head = {"commit": git_commit(), "date": utc_now(),
            "load_before": round(os.getloadavg()[0], 2), "n": a.n, "max_tokens": a.max_tokens,
            "machine": "x86_64, 2 cores (shared)"}
    rows: list[dict[str, Any]] = []
    for method in [m for m in a.methods.split(",") if m]:
        for rep in range(a.repeats):
            for backend, env in BACKENDS.items():
                r = {"method": method, "backend": backend, "repeat": rep,
                     **one_boot(method, env, a.n, a.max_tokens)}
                rows.append(r)
                print(json.dumps(r), flush=True)
                RESULTS.joinpath("boot_backend.json").write_text(
                    json.dumps({**head, "rows": rows}, indent=1) + "\n")
    report = text(head, rows)
    RESULTS.joinpath("boot_backend.txt").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
