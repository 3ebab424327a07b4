"""The draft-heads-lost fault, measured on real vLLM: healthy vs fault on the same drafter, with
the draft's attention tapped, and `taps check` on both tap directories.

    python benchmarks/draft_heads_lost.py [-n 16] [--max-tokens 64] [--k 4]

Two lab servers, one at a time: `--method draft_model` (the random target, served as its own
draft: greedy acceptance 1.0 when healthy), each with the draft-attention-taps pack on and
SPECDOCTOR_TAPS pointing at a directory of its own; then the same with `--fault
draft-heads-lost`. Each is measured with specdoctor's protocol (greedy, the "code" prompts, one
warm-up request) and its taps are checked (cosine vs the fp64 recompute, zero heads).
Writes benchmarks/results/draft_heads_lost.json and .txt. Not a test: two boots.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def run_case(fault: str | None, n: int, max_tokens: int, k: int, tapdir: Path) -> dict[str, Any]:
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.experiments.taps.check import check_dir
    from specdoctor.lab import lab
    from specdoctor.launch import free_port

    port = free_port()
    plan = lab.plan(lab.LabRequest(method="draft_model", k=k, port=port, fault=fault))
    spec = lab.with_packs(plan.spec, ("draft-attention-taps",))
    os.environ["SPECDOCTOR_TAPS"] = str(tapdir)  # the server inherits it
    os.environ["SPECDOCTOR_TAPS_MAX"] = "48"
    row: dict[str, Any] = {"case": fault or "healthy:draft_model", "fault": fault, "k": k,
                           "label": spec.label}
    t0 = time.perf_counter()
    try:
        lab.up(spec, timeout_s=1500)
        row["boot_s"] = round(time.perf_counter() - t0, 1)
        m = proto.run(spec.url, take("code", n), proto.MeasureParams(num_prompts=n, max_tokens=max_tokens))
        t = m.total
        row["measured"] = None if t is None else {
            "per_position": [round(x, 4) for x in t.per_position],
            "mean_acceptance_length": round(t.mean_acceptance_length, 4),
            "drafts": t.drafts, "accepted_per_position": list(t.accepted_per_position),
            "ci95": {k_: iv.to_json() for k_, iv in t.intervals.items()}}
        row["error"] = m.error
    except Exception as exc:  # noqa: BLE001 - a dead server is a result too
        row["measured"], row["error"] = None, f"{type(exc).__name__}: {str(exc)[:500]}"
    finally:
        lab.down(port)
        os.environ.pop("SPECDOCTOR_TAPS", None)
    findings = check_dir(tapdir) if any(tapdir.glob("*.safetensors")) else []
    rec = [f for f in findings if f.check == "recompute"]
    row["taps"] = {
        "records": len(list(tapdir.glob("*.safetensors"))),
        "layers": sorted({f.where.split(" layer ")[1].split(" ")[0] for f in rec}),
        "recompute_min_cosine": min((f.data["cosine"] for f in rec), default=None),
        "recompute_faults": sum(f.level == "fault" for f in rec),
        "zero_heads_faults": sum(f.check == "zero-heads" and f.level == "fault" for f in findings),
        "faults_by_check": {c: sum(f.check == c and f.level == "fault" for f in findings)
                            for c in sorted({f.check for f in findings})},
        "first_fault": next((f"{f.check}: {f.where}: {f.message}" for f in findings
                             if f.level == "fault"), None),
    }
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=4)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from _provenance import git_commit, load, machine, utc_now

    info = {"commit": git_commit(), "date": utc_now(), "machine": machine(), "load_at_start": load(),
            "protocol": {"method": "draft_model", "target": "random", "draft": "copy", "suite": "code",
                         "num_prompts": a.n, "max_tokens": a.max_tokens, "temperature": 0.0, "k": a.k,
                         "per_position": "unconditional (accepted at j / drafts)",
                         "mean_acceptance_length": "counts the bonus token"}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="draft-heads-taps-") as tmp:
        for fault in (None, "draft-heads-lost"):
            d = Path(tmp) / (fault or "healthy")
            print(f"[draft_heads_lost] {fault or 'healthy'} ...", file=sys.stderr, flush=True)
            rows.append(run_case(fault, a.n, a.max_tokens, a.k, d))
            print(json.dumps(rows[-1])[:600], file=sys.stderr, flush=True)
    out = {**info, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "draft_heads_lost.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [f"draft_heads_lost: commit {info['commit']}, {info['date']}, {info['machine']}",
             (f"draft_model, random target as its own draft, k={a.k}, greedy, {a.n} code prompts, "
              f"{a.max_tokens} tokens"), ""]
    for r in rows:
        m, t = r["measured"], r["taps"]
        acc = "—" if not m else (f"per-position {m['per_position']}, mean acceptance length "
                                 f"{m['mean_acceptance_length']}, drafts {m['drafts']}")
        lines.append(f"{r['case']}: {acc}; error: {r['error']}")
        lines.append(f"  taps: {t['records']} records, layers {t['layers']}, min cosine "
                     f"{t['recompute_min_cosine']}, faults {t['faults_by_check']}")
        if t["first_fault"]:
            lines.append(f"  first fault: {t['first_fault'][:300]}")
    (RESULTS / "draft_heads_lost.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
