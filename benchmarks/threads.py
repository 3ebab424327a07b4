"""CPU threads for the lab's small models: the oracle and drafter training with one thread
against two.

    python benchmarks/threads.py [--budget ci] [--repeats 3] [--train-steps 30]

- oracle: `specdoctor oracle --target T --draft D --k 4 -n 16 --max-tokens 64 --json` (the lab's
  trained target and its small drafter), greedy and sampled (T=1, top_p 0.95), each setting
  timed ``--repeats`` times, the settings alternating (A B A B) so a change of load touches
  both; per run: the simulation's tok/s and seconds per forward pass (the oracle's own cost
  figures, model loading excluded) and the acceptance profile.
- training: ``lab.train.fit_lm`` on a fresh lab-shaped Llama for ``--train-steps``
  steps, one thread against two, alternating.

Ratios are taken within one repeat (two threads / one thread), reported as min/median/max, with
the load average before and after. Writes benchmarks/results/threads.json and a .txt beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SAMPLINGS = {"greedy": "greedy", "sampled": "1.0,0.95"}


def oracle(target: Path, draft: Path, sampling: str, device: str, threads: int | None
           ) -> dict[str, Any]:
    args = [sys.executable, "-m", "specdoctor", "oracle", "--target", str(target), "--draft",
            str(draft), "--k", "4", "-n", "16", "--max-tokens", "64", "--sampling", sampling,
            "--device", device, "--no-store", "--json"]
    if threads is not None:
        args += ["--threads", str(threads)]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout)
    cost = out["cost"]
    forwards = cost["target_forwards"] + cost["draft_forwards"]
    return {"tok_s": cost["tokens_per_s"], "sim_s": cost["wall_s"],
            "ms_per_forward": round(1000 * cost["wall_s"] / max(forwards, 1), 3),
            "device": cost["device"], "threads": cost["threads"],
            "per_position": out["total"]["per_position"]}


def train_seconds(threads: int, steps: int) -> float:
    """Wall seconds of ``steps`` steps of the lab's training loop on a fresh lab-shaped Llama."""
    code = (
        "import sys, time, torch\n"
        "from dataclasses import replace\n"
        "from transformers import LlamaForCausalLM\n"
        "from specdoctor.lab import train\n"
        f"torch.set_num_threads({threads})\n"
        "r = train.recipe('target', 'full')\n"
        f"r = replace(r, steps={steps}, warmup_steps=2, threads={threads})\n"
        "src = train.target_model(r.model)  # the lab's random-weight Llama, untrained\n"
        "model = LlamaForCausalLM.from_pretrained(str(src), dtype=torch.float32)\n"
        "data = train.corpus_tokens(src)\n"
        "t0 = time.perf_counter()\n"
        "train.fit_lm(model, data, r)\n"
        "print(time.perf_counter() - t0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"training with {threads} thread(s) failed:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def mmm(xs: list[float]) -> dict[str, float]:
    return {"min": round(min(xs), 3), "median": round(statistics.median(xs), 3),
            "max": round(max(xs), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="ci", choices=("ci", "full"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-steps", type=int, default=30)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _provenance import git_commit, load, machine, utc_now

    from specdoctor.lab import train

    target, draft = train.trained_target(args.budget), train.small_drafter(args.budget)
    arms = [("cpu", 1), ("cpu", 2)]
    res: dict[str, Any] = {
        "script": "benchmarks/threads.py", "commit": git_commit(),
        "date": utc_now(), "machine": machine(), "load_before": load(),
        "models": {"target": target.name, "draft": draft.name, "budget": args.budget},
        "oracle": {"k": 4, "prompts": "16 code", "max_tokens": 64, "runs": []}}
    for rep in range(args.repeats):
        for name, sampling in SAMPLINGS.items():
            for device, threads in arms:
                r = oracle(target, draft, sampling, device, threads)
                res["oracle"]["runs"].append({"repeat": rep, "sampling": name,
                                              "arm": f"{device}:{threads or ''}".rstrip(":"), **r})
                print(json.dumps(res["oracle"]["runs"][-1]), file=sys.stderr, flush=True)
    arm_names = [f"{d}:{t or ''}".rstrip(":") for d, t in arms]
    summary: dict[str, Any] = {}
    for name in SAMPLINGS:
        runs = [r for r in res["oracle"]["runs"] if r["sampling"] == name]
        by = {a: [r for r in runs if r["arm"] == a] for a in arm_names}
        a, b = arm_names
        summary[name] = {
            **{f"{x}_tok_s": mmm([r["tok_s"] for r in by[x]]) for x in arm_names},
            **{f"{x}_ms_per_forward": mmm([r["ms_per_forward"] for r in by[x]]) for x in arm_names},
            f"ms_per_forward_{b}_over_{a}": mmm([rb["ms_per_forward"] / ra["ms_per_forward"]
                                                 for ra, rb in zip(by[a], by[b])]),
            "same_profile_every_run": len({json.dumps(r["per_position"]) for r in runs}) == 1}
    res["oracle"]["summary"] = summary
    train_runs = []
    for rep in range(args.repeats):
        one, two = train_seconds(1, args.train_steps), train_seconds(2, args.train_steps)
        train_runs.append({"repeat": rep, "threads_1_s": round(one, 2),
                           "threads_2_s": round(two, 2), "ratio_2_over_1": round(two / one, 3)})
        print(json.dumps(train_runs[-1]), file=sys.stderr, flush=True)
    res["training"] = {"steps": args.train_steps,
                       "recipe": "lab target (full): batch 16 x 256, from the random-weight Llama",
                       "runs": train_runs,
                       "ratio_2_over_1": mmm([r["ratio_2_over_1"] for r in train_runs])}
    res["load_after"] = load()
    stem = "threads"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [f"{res['script']} at {res['commit']}, {res['date']}, {res['machine']}"
             + f"; load {res['load_before']} -> {res['load_after']}",
             f"models {target.name} / {draft.name} ({args.budget}), k=4, 16 code prompts x 64 tokens"]
    for name, s in summary.items():
        lines.append(f"oracle {name}: " + "; ".join(f"{k} {v}" for k, v in s.items()))
    lines.append(f"training {args.train_steps} steps, 2 threads / 1 thread: "
                 f"{res['training']['ratio_2_over_1']}")
    (RESULTS / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
