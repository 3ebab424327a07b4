"""The vocabulary map learned from an EAGLE3 head's own proposals, on the recorded proposals of
the lab's full-budget head (tests/fixtures/oracle/eagle3_slot_pairs.json says how they were
recorded): the head as trained, its d2t/t2d regenerated from other data, and saved without them.

    python benchmarks/vocab_proposals.py      # writes benchmarks/results/vocab_proposals.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import ROOT, git_commit, utc_now  # noqa: E402

from specdoctor.oracle import slotmap  # noqa: E402
from specdoctor.oracle.slotmap import SlotPairs  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "oracle" / "eagle3_slot_pairs.json"
OUT = ROOT / "benchmarks" / "results" / "vocab_proposals.txt"


def main() -> None:
    data = json.loads(FIXTURE.read_text())
    lines = [f"vocabulary map from the head's proposals (commit {git_commit()}, {utc_now()})",
             f"data: {FIXTURE.relative_to(ROOT)}", "",
             f"{'variant':<12} {'positions':>9} {'served':>7} {'learned':>8} {'slots moved':>11} "
             f"{'gained':>6} {'lost':>5} {'p':>9} {'gain<=':>7}  verdict"]
    for name, v in data["variants"].items():
        pairs = [SlotPairs(p["index"], np.array(p["slots"]), np.array(p["nexts"]))
                 for p in v["prompts"]]
        h, _ = slotmap.held_out(pairs, np.array(v["served"]))
        n = max(h.positions, 1)
        verdict = ("learned map better: oracle counterfactual" if h.learned_better else
                   "served map cleared" if h.rules_out else "open")
        lines.append(f"{name:<12} {h.positions:>9} {h.served / n:>7.1%} {h.learned / n:>8.1%} "
                     f"{h.slots_changed:>11} {h.better:>6} {h.worse:>5} {h.p:>9.2g} "
                     f"{h.gain_upper:>+7.1%}  {verdict}")
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
