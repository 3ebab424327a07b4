"""Kernel equivalence on a CUDA GPU: the default suite (and the long one) through torch's
attention paths, with an fp64 and an fp32 reference, timed.

One warm-up pass (CUDA context, first kernels), then --repeats timed passes of the
default suite with the fp64 reference and the same with fp32; per pass: total wall time,
the reference's share, input building. Then one pass of the `long` suite (fp64).
Errors are deterministic (seeded inputs); they come from the last fp64 pass.

    PYTHONPATH=src python benchmarks/kernels_gpu.py --commit SHA [--out DIR] [--repeats 3]

Writes DIR/kernels_gpu.json (DIR defaults to $OUT, else benchmarks/results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from specdoctor.experiments.kernels.adapters import load
from specdoctor.experiments.kernels.cases import load_suite
from specdoctor.experiments.kernels.run import Report, check

IMPLS = ["sdpa", "flex", "flash-attn", "vllm-cpu"]


def spread(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def passes(suite: str, ref: str, n: int) -> tuple[list[Report], dict[str, Any]]:
    cases = load_suite(suite)
    reports = [check(cases, load(IMPLS, "cuda"), "cuda", suite, reference_dtype=ref) for _ in range(n)]
    totals = [r.total_seconds for r in reports]
    refs = [r.reference_seconds for r in reports]
    timing = {"passes": n, "total_s": spread(totals), "reference_s": spread(refs),
              "inputs_s": spread([r.build_seconds for r in reports]),
              "reference_fraction": spread([a / b for a, b in zip(refs, totals, strict=True)])}
    return reports, timing


def rows(r: Report) -> list[dict[str, Any]]:
    return [{"impl": x.impl, "case": x.case, "dtype": x.dtype, "max_abs": x.max_abs, "max_rel": x.max_rel,
             "tol": x.tol, "ok": x.ok, "worst": x.worst, "seconds": x.seconds, "error": x.error}
            for x in r.results]


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "benchmarks/results"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    print("warm-up pass", file=sys.stderr)
    check(load_suite("default"), load(IMPLS, "cuda"), "cuda", "default")
    out: dict[str, Any] = {
        "script": "benchmarks/kernels_gpu.py", "commit": args.commit,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
    }
    for ref in ("float64", "float32"):
        print(f"default suite, {ref} reference x{args.repeats}", file=sys.stderr)
        reports, timing = passes("default", ref, args.repeats)
        last = reports[-1]
        out[f"default_{ref}_reference"] = {
            "ok": last.ok, "control_caught": last.control_caught, "timing": timing,
            "skipped": {a.name: a.unavailable for a in last.adapters if a.unavailable},
            "control": [{"case": c.case, "must_fail": c.must_fail, "failed": c.failed, "max_abs": c.max_abs}
                        for c in last.control],
            "results": rows(last)}
    print("long suite, float64 reference", file=sys.stderr)
    reports, timing = passes("long", "float64", 1)
    out["long_float64_reference"] = {"ok": reports[0].ok, "control_caught": reports[0].control_caught,
                                     "timing": timing,
                                     "results": [x for x in rows(reports[0]) if x["case"].startswith("long/")]}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "kernels_gpu.json"
    path.write_text(json.dumps(out, indent=1, default=str))
    d = out["default_float64_reference"]
    print(f"{out['device']}: default suite ok={d['ok']} total median {d['timing']['total_s']['median']:.2f} s, "
          f"reference fraction {d['timing']['reference_fraction']['median']:.2f}; long ok="
          f"{out['long_float64_reference']['ok']}; wrote {path}")
    return 0 if d["ok"] and out["long_float64_reference"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
