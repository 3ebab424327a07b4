"""DFlash on real vLLM against the lab's reference forward, draft token by draft token.

    python benchmarks/dflash_trace.py [-n 16] [--max-tokens 64] [--log FILE]

Boots the trained DFlash lab server with the engine hook (``oracle.engine_trace``: every verify
step's draft ids and emitted tokens), measures greedy code prompts, then recomputes each step's
drafts with ``lab.drafters.dflash.forward`` on the same text and context. For every draft token
the two disagree on, it reports the reference's logit margin between its own choice and the
engine's. Tallies are split by how many drafts the previous step accepted, which separates a
forward that differs everywhere (flat) from state carried across steps (rising with rejections).

With --log FILE it analyses an earlier hook log instead of booting a server.
Writes benchmarks/results/dflash_trace.json. Not a test: one boot, ~4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
K = 3


def record(log: Path, n: int, max_tokens: int) -> dict[str, Any]:
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace

    port = free_port()
    spec = labmod.lab_spec("dflash", K, port)
    spec = dataclasses.replace(spec, env={**spec.env, **engine_trace.hook_env(log)})
    try:
        labmod.up(spec, timeout_s=900)
        m = proto.run(spec.url, take("code", n), proto.MeasureParams(num_prompts=n,
                                                                     max_tokens=max_tokens))
    finally:
        labmod.down(port)
    t = m.total
    return {"drafts": t.drafts, "accepted_per_position": list(t.accepted_per_position),
            "per_position": [round(x, 4) for x in t.per_position]} if t else {}


def compare(log: Path, n: int, max_tokens: int) -> dict[str, Any]:
    import torch

    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import cache, dflash, targets
    from specdoctor.oracle import engine_trace

    target, draft = drafters.module("dflash").trained_pair("full")
    reqs = engine_trace.read(log)[-n:]  # the warm-up request comes first
    data = targets.prompt_data(target, take("code", n), max_tokens)
    p, s = dflash.load(draft)
    tt = cache.load_tensors(target)
    embed, head = tt["model.embed_tokens.weight"], tt["lm_head.weight"]
    by_prev: dict[str, list[int]] = {}
    margins: list[float] = []
    steps = tokens = differ = 0
    runner_up, diff_by_pos = 0, [0] * K
    for d, r in zip(data, reqs, strict=True):
        t = d.ids.shape[1]
        aux = torch.cat([d.aux[i] for i in s.aux_ids], -1)
        with torch.no_grad():
            logits = dflash.forward(p, s, embed, head, aux, d.ids, torch.arange(1, t)[None],
                                    K)[0]  # [T-1, K, V]: the block anchored at P is row P-1
        anchor, prev = d.prompt_len - 1, "first"
        for drafted, out in r.rows:
            if drafted and anchor - 1 < logits.shape[0]:
                lg = logits[anchor - 1]
                mine = lg.argmax(-1).tolist()
                bad = [j for j, (e, o) in enumerate(zip(drafted, mine)) if e != o]
                steps, tokens, differ = steps + 1, tokens + len(drafted), differ + len(bad)
                tally = by_prev.setdefault(prev, [0, 0])
                tally[0] += 1
                tally[1] += int(bool(bad))
                for j in bad:
                    diff_by_pos[j] += 1
                    margins.append(float(lg[j, mine[j]] - lg[j, drafted[j]]))
                    runner_up += int(lg[j].topk(2).indices[1] == drafted[j])
                prev = f"after {len(out) - 1} accepted"
            elif drafted:
                break
            anchor += len(out)
    q = statistics.quantiles(margins, n=10) if len(margins) >= 10 else []
    return {"steps": steps, "draft_tokens": tokens, "tokens_that_differ": differ,
            "differ_by_position": diff_by_pos,
            "engine_token_is_the_reference_runner_up": runner_up,
            "reference_margin_at_differences": {
                "median": round(statistics.median(margins), 4) if margins else None,
                "p10": round(q[0], 4) if q else None, "p90": round(q[-1], 4) if q else None,
                "max": round(max(margins), 4) if margins else None},
            "steps_with_a_difference_by_previous_step": {
                k: {"steps": v[0], "with_difference": v[1]} for k, v in sorted(by_prev.items())}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--log", type=Path, default=None, help="analyse this hook log (no boot)")
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"n": args.n, "max_tokens": args.max_tokens, "k": K}
    log = args.log
    if log is None:
        log = Path(tempfile.mkdtemp()) / "drafts.jsonl"
        log.write_text("")
        out["measured"] = record(log, args.n, args.max_tokens)
    out["comparison"] = compare(log, args.n, args.max_tokens)
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dflash_trace.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
