"""Oracle speed on CPU for the lab models, and its cost beside one `measure` run of the lab
server on the same prompts.

Both sides run as a user runs them, as separate processes through the CLI, so each figure
includes process start, imports and model loading:

- oracle: `specdoctor oracle --target T --draft D --k 4 -n N --max-tokens M` (greedy), the same
  sampled (T=1.0, top_p 0.95, drafts by argmax, one trajectory per prompt), and prompt lookup;
- measure: one lab server (draft_model, the same T and D, k 4) booted once; then
  `specdoctor measure --url … -n N --max-tokens M`. Its cost is the client process plus the
  server's CPU time during the run (every process of the server's tree); the boot is reported
  apart, since a server that is already up does not pay it again.

    python benchmarks/oracle_speed.py [--budget full|ci] [-n 16] [--max-tokens 64] [--out FILE]
    python benchmarks/oracle_speed.py --heads [--budget full|ci] [--repeats 3] [--out FILE]

``--heads`` times, without a server, the oracle of each hidden-state drafter (EAGLE3, MTP,
DFlash: the lab's trained drafters, k as the lab serves them), greedy and sampled (T=1,
top_p=0.95), each greedy command ``--repeats`` times (sampled ``--sampled-repeats``):
min/median/max of the whole command's wall time
(process start, imports, loading, simulation) against the target of one minute.

The machine is shared: read the CPU-seconds columns more than the wall-clock ones.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> tuple[dict, float, float]:
    """Run `python -m specdoctor ARGS --json`; (output, wall s, CPU s of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "specdoctor", *args, "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"specdoctor {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(proc.stdout), wall, cpu


def tree_cpu(pid: int) -> float:
    import psutil

    total = 0.0
    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def heads(args: argparse.Namespace) -> None:
    import statistics

    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import targets

    lines = [
        f"oracle speed, hidden-state drafters, {time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, {os.cpu_count()} cores (shared; load average "
        f"{os.getloadavg()[0]:.1f} at start), python {platform.python_version()}",
        f"{args.num_prompts} code prompts x {args.max_tokens} tokens, training budget "
        f"{args.budget} (the shapes are the same for every budget); whole command wall s, "
        f"min/median/max of {args.repeats} (sampled: {args.sampled_repeats}); target: under "
        f"60 s",
        "",
        f"{'method':<8}{'k':>3}  {'sampling':<10}{'command s (min/med/max)':>26}"
        f"{'simulation s':>14}{'tok/s':>8}  per position",
    ]
    for method in drafters.METHODS:
        target, draft = drafters.module(method).trained_pair(args.budget)
        k = drafters.TRAINED_K[method]
        for sampling in ("greedy", "1.0,0.95"):
            walls, out = [], None
            for _ in range(args.repeats if sampling == "greedy" else args.sampled_repeats):
                out, wall, _cpu = cli("oracle", "--target", str(target), "--method", method,
                                      *(("--draft", str(draft)) if draft else ()),
                                      "--tokenizer", str(targets.tokenizer_dir()), "--k", str(k),
                                      "-n", str(args.num_prompts), "--max-tokens",
                                      str(args.max_tokens), "--sampling", sampling, "--no-store")
                walls.append(wall)
            assert out is not None
            c = out["cost"]
            lines.append(
                f"{method:<8}{k:>3}  {sampling:<10}"
                f"{min(walls):>10.1f} / {statistics.median(walls):.1f} / {max(walls):.1f}"
                f"{c['wall_s']:>14.1f}{c['tokens_per_s']:>8.1f}  "
                + " / ".join(f"{x:.3f}" for x in out["total"]["per_position"]))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out_path = args.out or ROOT / "benchmarks/results/oracle_speed_heads.txt"
    out_path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", choices=["full", "ci"], default="full")
    ap.add_argument("-n", "--num-prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--heads", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sampled-repeats", type=int, default=1)
    args = ap.parse_args()
    if args.heads:
        return heads(args)

    from specdoctor.lab import lab as labmod
    from specdoctor.lab import train
    from specdoctor.launch import free_port

    target, draft = train.trained_target(args.budget), train.small_drafter(args.budget)
    common = ("--k", str(args.k), "-n", str(args.num_prompts), "--max-tokens",
              str(args.max_tokens), "--no-store")
    oracle_runs = {}
    for name, extra in (("greedy", ("--draft", str(draft))),
                        ("sampled T=1 top_p=.95",
                         ("--draft", str(draft), "--sampling", "1.0,0.95")),
                        ("ngram greedy", ("--method", "ngram"))):
        oracle_runs[name] = cli("oracle", "--target", str(target), *extra, *common)

    port = free_port()
    spec = labmod.lab_spec("draft_model", args.k, port, target=target, draft=draft)
    t0 = time.perf_counter()
    try:
        handle = labmod.up(spec)
        boot = time.perf_counter() - t0
        boot_cpu = tree_cpu(handle.pid)
        before = tree_cpu(handle.pid)
        measured, m_wall, m_cpu = cli("measure", "--url", spec.url, "-n", str(args.num_prompts),
                                      "--max-tokens", str(args.max_tokens), "--no-store")
        server_cpu = tree_cpu(handle.pid) - before
    finally:
        labmod.down(port)

    lines = [
        f"oracle speed, {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} "
        f"cores (shared), python {platform.python_version()}",
        f"models: {target.name} (target), {draft.name} (drafter), training budget "
        f"{args.budget}; k={args.k}; {args.num_prompts} code prompts x {args.max_tokens} tokens",
        "",
        f"{'run':<28}{'tok/s':>8}{'sim s':>8}{'sim CPU-s':>10}{'load s':>8}"
        f"{'process s':>11}{'process CPU-s':>15}",
    ]
    for name, (out, wall, cpu) in oracle_runs.items():
        c = out["cost"]
        lines.append(f"oracle {name:<21}{c['tokens_per_s']:>8.1f}{c['wall_s']:>8.1f}"
                     f"{c['cpu_s']:>10.1f}{c['load_s']:>8.1f}{wall:>11.1f}{cpu:>15.1f}")
    m_tok = measured["output_tokens"]
    lines += [
        "",
        f"measure (lab server, draft_model k={args.k}): {m_tok} tokens, requests "
        f"{measured['wall_s']:.1f} s ({measured['output_tok_s']:.1f} tok/s), whole command "
        f"{m_wall:.1f} s; CPU-s: client {m_cpu:.1f} + server {server_cpu:.1f} = "
        f"{m_cpu + server_cpu:.1f}",
        f"server boot (paid once per server): {boot:.0f} s, {boot_cpu:.0f} CPU-s",
        "",
        "cost of one greedy oracle run relative to one measure run on the same prompts:",
    ]
    g_out, g_wall, g_cpu = oracle_runs["greedy"]
    lines += [
        f"  wall, whole commands:            {g_wall:.1f} / {m_wall:.1f} s = {g_wall / m_wall:.2f}",
        f"  CPU-seconds, whole commands:     {g_cpu:.1f} / {m_cpu + server_cpu:.1f} = "
        f"{g_cpu / (m_cpu + server_cpu):.2f}",
        f"  with the server's boot counted:  {g_cpu:.1f} / {m_cpu + server_cpu + boot_cpu:.1f} "
        f"CPU-s = {g_cpu / (m_cpu + server_cpu + boot_cpu):.2f}",
        f"  simulation alone (no imports/loading): {g_out['cost']['cpu_s']:.1f} CPU-s",
        "",
        "oracle profile (greedy): " + json.dumps(g_out["total"]["per_position"]),
        "measured profile:        " + json.dumps(measured["total"]["per_position"]),
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
