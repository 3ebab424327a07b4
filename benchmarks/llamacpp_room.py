"""llama-server's drafts at the end of a request, against the oracle with and without a room.

llama-server drafts at most the tokens a request has left to generate, less one, and counts a
step with no room left as a draft; vLLM drafts k tokens to the end. An oracle that drafts k to
the end counts more draft tokens in the last steps than llama-server does, and more accepted
per draft. This serves the llama.cpp lab's pair (trained target, small drafter as q8_0, k 4,
as ``specdoctor lab up --engine llamacpp --target trained --draft small`` serves them),
measures it greedy (16 code prompts x 64 tokens, concurrency 1, specdoctor's protocol), and
runs the oracle on the same prompts from the served GGUF files with each room (none, 0, 1,
2): per request, whether its drafts, draft tokens and accepted tokens equal the server's.
Prints one table; writes it with every request's counts to
benchmarks/results/llamacpp_room.{txt,json}.

    python3 benchmarks/llamacpp_room.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "llamacpp_room"
N, TOKENS, K = 16, 64, 4
ROOMS = (None, 0, 1, 2)


def _commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def _served() -> list[tuple[int, int, int]]:
    """(drafts, draft tokens, accepted) per request of the lab's llama-server, greedy."""
    from specdoctor.bench import measure as proto
    from specdoctor.lab import llamacpp
    from specdoctor.launch import LaunchSpec, free_port
    from specdoctor.launch import argv as A
    from specdoctor.launch.servers import running

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(target="trained", draft="small", k=K,
                                                  draft_type="q8_0"))
    port = free_port()
    spec = LaunchSpec(argv=A.put(plan.spec.argv, "--port", str(port)), env={}, port=port,
                      label="llamacpp room")
    with tempfile.TemporaryDirectory() as tmp:
        with running(spec, Path(tmp) / "server.log", die_with_parent=True) as h:
            m = proto.measure(h.url, proto.MeasureParams(num_prompts=N, max_tokens=TOKENS))
            proto.drafts_from_log(m, (Path(tmp) / "server.log").read_text())
    return [(r.profile.drafts, r.profile.draft_tokens, r.profile.accepted_tokens)
            for r in m.requests]


def _oracle(room: int | None) -> list[tuple[int, int, int]]:
    import numpy as np
    import torch

    from specdoctor import gguf_files
    from specdoctor.bench.prompts import take
    from specdoctor.lab import llamacpp
    from specdoctor.oracle.models import load_model, load_tokenizer
    from specdoctor.oracle.simulate import CachedLM, ModelDrafter, Sampling, run_request
    from specdoctor.served_files import read_config

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(target="trained", draft="small", k=K,
                                                  draft_type="q8_0"))
    t_dir, d_dir = gguf_files.hf_dir(plan.target), gguf_files.hf_dir(plan.draft)
    tok = load_tokenizer(t_dir)
    target = CachedLM(load_model(t_dir, "cpu", "float32"), "cpu")
    drafter = ModelDrafter(CachedLM(load_model(d_dir, "cpu", "float32"), "cpu"),
                           int(read_config(t_dir)["vocab_size"]))
    out = []
    with torch.inference_mode():
        for i, p in enumerate(take("code", N)):
            tr = run_request(list(tok(p)["input_ids"]), target, drafter, K, TOKENS, Sampling(),
                             np.random.default_rng(0), i, 0, None, room)
            out.append((len(tr.steps), sum(s.drafted for s in tr.steps),
                        sum(s.accepted for s in tr.steps)))
    return out


def main() -> None:
    served = _served()
    rows = {str(r): _oracle(r) for r in ROOMS}
    head = (f"llama-server's drafts at the end of a request vs the oracle's (commit "
            f"{_commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; lab pair "
            f"trained/small q8_0, k {K}, greedy, {N} code prompts x {TOKENS} tokens)")
    total = [sum(x[i] for x in served) for i in range(3)]
    lines = [head, "",
             f"served: {total[0]} drafts, {total[1]} draft tokens, {total[2]} accepted, "
             f"{total[2] / total[0]:.3f} accepted per draft", "",
             "| room | requests equal to the server's (drafts, draft tokens, accepted) | drafts "
             "| draft tokens | accepted | accepted per draft |", "|---|---|---|---|---|---|"]
    for room, got in rows.items():
        same = sum(a == b for a, b in zip(got, served))
        t = [sum(x[i] for x in got) for i in range(3)]
        lines.append(f"| {'none (k to the end)' if room == 'None' else room} | {same} of "
                     f"{len(served)} | {t[0]} | {t[1]} | {t[2]} | {t[2] / t[0]:.3f} |")
    text = "\n".join(lines) + "\n"
    OUT.with_suffix(".txt").write_text(text)
    OUT.with_suffix(".json").write_text(json.dumps(
        {"head": head, "served": served, "oracle": rows}, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
