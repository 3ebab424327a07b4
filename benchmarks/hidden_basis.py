"""hidden-basis on the lab's trained EAGLE3 heads: each head beside its own target, beside that
target rotated QuaRot-style (``specdoctor.lab.rotated``), and rotated and rounded to int8 (the
clinic's ``up-eagle3-quarot-target``), through the oracle on 6 code + 6 essay prompts x 48
tokens, k=3. Also the oracle of each head beside its own target (what "recovered" is measured
against). The full-budget head only where it is built (``specdoctor lab up --method eagle3``).

    python benchmarks/hidden_basis.py      # writes benchmarks/results/hidden_basis.txt
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import ROOT, git_commit, machine, utc_now  # noqa: E402

from specdoctor.bench.prompts import take  # noqa: E402
from specdoctor.experiments.base import Context
from specdoctor.experiments.basis import HiddenBasis  # noqa: E402
from specdoctor.experiments.common import Settings, apd  # noqa: E402
from specdoctor.experiments.oracle_gap import expected_profile, run_oracle  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "hidden_basis.txt"
K = 3
VARIANTS = {"own target": None, "rotated": False, "rotated+int8": True}


def context(work: Path, target: Path, draft: Path, tok: Path) -> Context:
    return Context(workdir=work, method="eagle3", k=K, target_dir=target, draft_dir=draft,
                   tokenizer_dir=tok, prompts=tuple(take("code", 6) + take("essay", 6)),
                   max_tokens=48, settings=Settings(target, "eagle3", K, draft, tok, (2, 4),
                                                    "float32", None, "greedy"))


def built(budget: str) -> bool:
    from specdoctor.lab import atomic, drafters, models, train
    from specdoctor.lab.drafters import cache

    class Missing(Exception):
        pass

    def refuse(*_a: object, **_k: object) -> None:
        raise Missing

    saved = [(m, m.build_dir) for m in (atomic, models, train, cache)]
    try:
        for m, _ in saved:
            m.build_dir = refuse
        drafters.module("eagle3").trained_pair(budget)
        return True
    except Missing:
        return False
    finally:
        for m, f in saved:
            m.build_dir = f


def main() -> None:
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import targets
    from specdoctor.lab.rotated import rotate_target

    budgets = ["ci"] + (["full"] if built("full") else [])
    lines = [f"hidden-basis on the lab's EAGLE3 heads (commit {git_commit()}, {utc_now()})",
             f"machine: {machine()}", f"heads: {', '.join(budgets)} budget; 6 code + 6 essay "
             f"prompts x 48 tokens, k={K}, greedy oracle", "",
             f"{'head':<5} {'target':<13} {'cos served':>10} {'cos aligned':>11} "
             f"{'verdict':<10} {'before':>7} {'after':>7} {'own':>7} {'s':>5}"]
    for budget in budgets:
        src_t, src_d = drafters.module("eagle3").trained_pair(budget)
        tok = targets.tokenizer_dir()
        with tempfile.TemporaryDirectory() as tmp:
            own = apd(expected_profile(run_oracle(context(Path(tmp) / "own", src_t, src_d, tok),
                                                  0.0, 1.0)))
            for name, int8 in VARIANTS.items():
                t, d = Path(tmp) / name / "t", Path(tmp) / name / "d"
                for s, dst in ((src_t, t), (src_d, d)):
                    shutil.copytree(s, dst, ignore=shutil.ignore_patterns("specdoctor*"))
                if int8 is not None:
                    rotate_target(t, seed=0, int8=int8)
                t0 = time.perf_counter()
                res = HiddenBasis().run(context(Path(tmp) / name / "w", t, d, tok),
                                        ("target-basis",))
                (f,) = res.findings
                p = res.numbers["pairs"][0] if res.numbers.get("pairs") else {}
                n = res.numbers
                lines.append(
                    f"{budget:<5} {name:<13} {p.get('served', float('nan')):>10.3f} "
                    f"{p.get('aligned', float('nan')):>11.3f} {f.verdict.value:<10} "
                    f"{n.get('before', float('nan')):>7.3f} {n.get('after', float('nan')):>7.3f} "
                    f"{own:>7.3f} {time.perf_counter() - t0:>5.1f}")
    lines += ["", "cos: mean cosine of the head's lm_head rows with the target's LM-head rows "
              "of the same target ids, held-out half; before/after: the oracle's accepted per "
              "draft as served and with the head rotated back (only run for a rotated "
              "verdict); own: the head beside its own target"]
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
