"""llama.cpp's confidence stop, measured against the oracle with and without it.

llama-server drafts with a draft model until the drafter's top token has probability under
``--spec-draft-p-min`` among its top 10 (that token is not drafted), and drops a draft shorter
than ``--spec-draft-n-min``. An oracle that drafts k tokens at every step compares another
engine than the one served. For each p_min this serves the llama.cpp lab's pair (trained
target, small drafter, as ``specdoctor lab up --engine llamacpp --target trained --draft small``
serves them, k 4), measures it greedy (``specdoctor measure``: 8 code prompts x 48 tokens,
concurrency 1), and runs the oracle on the same prompts from the served GGUF files twice: with
llama.cpp's policy (``--draft-p-min``) and without it. Prints one table; writes it with the
figures to benchmarks/results/llamacpp_p_min.{txt,json}.

    python3 benchmarks/llamacpp_p_min.py [--p-min 0,0.5,0.75,0.9]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "llamacpp_p_min"
N, TOKENS, K = 8, 48, 4


def _cli(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "specdoctor", *args, "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"specdoctor {' '.join(args)}: exit {proc.returncode}\n"
                         f"{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def _commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def _figures(profile: dict) -> dict:
    return {k: profile.get(k) for k in ("accepted_per_draft", "drafts", "draft_tokens",
                                        "accepted_tokens")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p-min", default="0,0.5,0.75,0.9")
    a = ap.parse_args()
    from specdoctor import gguf_files
    from specdoctor.launch import LaunchSpec, free_port
    from specdoctor.launch import argv as A
    from specdoctor.launch.servers import running
    from specdoctor.lab import llamacpp

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(target="trained", draft="small", k=K))
    target, draft = gguf_files.hf_dir(plan.target), gguf_files.hf_dir(plan.draft)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SPECDOCTOR_DB"] = str(Path(tmp) / "store.db")
        for p in [float(x) for x in a.p_min.split(",")]:
            port = free_port()
            argv = A.put(A.put(plan.spec.argv, "--spec-draft-p-min", f"{p:g}"), "--port",
                         str(port))
            spec = LaunchSpec(argv=argv, env={}, port=port, label="llamacpp p_min")
            with running(spec, Path(tmp) / f"server-{p:g}.log", die_with_parent=True) as h:
                m = _cli("measure", "--url", h.url, "-n", str(N), "--max-tokens", str(TOKENS),
                         "--suite", "code", "--no-store")
            oracle = {}
            for name, policy in (("with_policy", ["--draft-p-min", f"{p:g}"]),
                                 ("k_every_step", [])):
                o = _cli("oracle", "--target", str(target), "--draft", str(draft), "--k",
                         str(K), "--suite", "code", "--num-prompts", str(N), "--max-tokens",
                         str(TOKENS), "--no-store", *policy)
                oracle[name] = _figures(o["total"])
            rows.append({"p_min": p, "measured": _figures(m["total"]), **oracle})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    head = (f"llama.cpp confidence stop vs the oracle (commit {_commit()}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; lab pair trained/small, "
            f"k {K}, greedy, {N} code prompts x {TOKENS} tokens)")
    lines = [head, "",
             "| p_min | measured acc/draft | drafts | draft tokens | accepted "
             "| oracle with policy | drafts | draft tokens | accepted "
             "| oracle k every step | drafts | draft tokens | accepted |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = []
        for key in ("measured", "with_policy", "k_every_step"):
            f = r[key]
            apd = f["accepted_per_draft"]
            cells += [f"{apd:.3f}" if apd is not None else "-", str(f["drafts"]),
                      str(f["draft_tokens"]), str(f["accepted_tokens"])]
        lines.append(f"| {r['p_min']:g} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    OUT.with_suffix(".txt").write_text(text)
    OUT.with_suffix(".json").write_text(json.dumps({"head": head, "rows": rows}, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
