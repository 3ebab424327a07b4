"""What the replay benchmarks share: one traced lab server measured in one mode, and the loop
that runs setups one at a time and writes results (and, on request, the decision's fixtures).

Imported by ``replay_positions.py`` and ``replay_certain.py`` (``python benchmarks/NAME.py``
puts this folder on sys.path).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _provenance import git_commit, utc_now

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def record(spec: Any, log: Path, n: int, max_tokens: int, temperature: float = 0.0,
           top_p: float = 1.0) -> dict[str, Any]:
    """Boot ``spec`` (a launch already carrying the draft trace into ``log``), measure ``n``
    code prompts once, stop; the prompts, the engine's traced requests, the measurement
    (``m``) with its totals, and the server's log text."""
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.lab import lab as labmod
    from specdoctor.oracle import engine_trace

    prompts = take("code", n)
    t0 = time.monotonic()
    try:
        labmod.up(spec, timeout_s=1200)
        boot = round(time.monotonic() - t0, 1)
        m = proto.run(spec.url, prompts, proto.MeasureParams(
            num_prompts=n, max_tokens=max_tokens, temperature=temperature, top_p=top_p))
        reqs = engine_trace.read(log)
        server_log = labmod.log_path(spec.port).read_text(errors="replace")
    finally:
        labmod.down(spec.port)
    tot = m.total
    return {"spec": spec, "prompts": prompts, "reqs": reqs, "boot_s": boot, "m": m,
            "server_log": server_log,
            "measured": {"error": m.error, "accepted_per_draft": None if tot is None
                         else round(tot.accepted_per_draft or 0.0, 4),
                         "per_position": None if tot is None
                         else [round(x, 4) for x in tot.per_position]}}


def replay_models(rec: dict[str, Any]) -> tuple[Any, Any, int]:
    """The oracle's target and draft model for a recorded self-draft server, and its k."""
    from specdoctor.experiments import common
    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.runner import OracleConfig

    s = common.settings(rec["spec"])
    assert s.target is not None and s.k is not None
    cfg = OracleConfig(target=s.target, prompts=tuple(rec["prompts"]), method="draft_model",
                       draft=s.draft, tokenizer=s.tokenizer, k=s.k,
                       max_model_len=s.max_model_len)
    target, drafter = engine_trace.load_replay_models(cfg)
    return target, drafter, s.k


Setup = Callable[[str, int, int, Path], tuple[dict[str, Any], dict[str, Any] | None]]


def main(doc: str, setups: tuple[str, ...], stem: str, one: Setup,
         text: Callable[[list[dict[str, Any]], dict[str, Any]], str],
         fixture_name: Callable[[str], str], argv: list[str] | None = None) -> int:
    """Parse ``--setups -n --max-tokens --fixtures``; for each setup, ``one(setup, n,
    max_tokens, run_dir)`` gives its results row and its fixture (without the header fields);
    rows go to benchmarks/results/{stem}.json and .txt after each setup."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--setups", default=",".join(setups))
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--fixtures", type=Path, default=None,
                    help="write each setup's recorded steps here (JSON, one file per setup)")
    a = ap.parse_args(argv)
    chosen = [x for x in a.setups.split(",") if x]
    unknown = sorted(set(chosen) - set(setups))
    if unknown:
        ap.error(f"unknown setup(s) {unknown}; choose from {', '.join(setups)}")
    head = {"commit": git_commit(), "date": utc_now(),
            "load_before": round(os.getloadavg()[0], 2), "n": a.n, "max_tokens": a.max_tokens,
            "machine": "x86_64, 2 cores (shared)"}
    rows = []
    for setup in chosen:
        print(f"{stem}: {setup} …", file=sys.stderr, flush=True)
        row, fx = one(setup, a.n, a.max_tokens, Path(tempfile.mkdtemp(prefix=f"{stem}-")))
        rows.append({"setup": setup, **row})
        if a.fixtures is not None and fx is not None:
            a.fixtures.mkdir(parents=True, exist_ok=True)
            fx["about"] = (f"Recorded from a real lab run by benchmarks/{stem}.py ({fx['about']})"
                           f" at commit {head['commit']}, {head['date']}")
            (a.fixtures / fixture_name(setup)).write_text(
                json.dumps(fx, separators=(",", ":")) + "\n")
        head["load_after"] = round(os.getloadavg()[0], 2)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{stem}.json").write_text(
            json.dumps({**head, "rows": rows}, indent=1, default=str) + "\n")
        (RESULTS / f"{stem}.txt").write_text(text(rows, head) + "\n")
    print(text(rows, head))
    return 0
