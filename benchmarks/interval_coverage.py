"""How often the bootstrap's "95% interval" covers the true rate, by number of units.

`specdoctor logs` and `measure` report a 95% interval by resampling whole units (log windows or
requests; ``acceptance.bootstrap``). With few units the resampled spread underestimates the
real one, and with two units it is just their range. This simulates profiles whose true rate is
known and counts how often the interval covers it, for each number of units, to choose the
fewest units below which the interval is reported unavailable (``bootstrap.MIN_UNITS``).

Simulation: a fixed-length drafter with k draft tokens. Each unit (a request, or a log window)
draws its own acceptance probability p from Beta(a, b) — hard and easy passages differ — and a
number of drafts, uniform in [lo, hi]; each draft accepts a prefix of length min(G, k), G
geometric with continuation probability p (accepted prefixes are prefix-closed). The true
figures are the population ones, exact from Beta moments: accepted per draft = sum_i E[p^i],
acceptance rate = that / k, position i = E[p^(i+1)]. Each trial draws n units, computes the
bootstrap interval exactly as the tool does, and checks whether it holds the true value.

    python benchmarks/interval_coverage.py [--trials 400] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from specdoctor.acceptance.bootstrap import bootstrap_intervals
from specdoctor.acceptance.profile import AcceptanceProfile

UNITS = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
# (label, Beta a, Beta b, k, drafts per unit lo..hi): a log-window-like case (many drafts per
# unit, mild heterogeneity) and a request-like one (few drafts, strong heterogeneity).
SCENARIOS = (
    ("windows: 200-2000 drafts, p~Beta(14,6), k=4", 14.0, 6.0, 4, 200, 2000),
    ("requests: 5-40 drafts, p~Beta(3,2), k=3", 3.0, 2.0, 3, 5, 40),
)
FIGURES = ("mean_acceptance_length", "acceptance_rate", "per_position[0]")


def beta_moment(a: float, b: float, i: int) -> float:
    """E[p^i] for p ~ Beta(a, b)."""
    out = 1.0
    for j in range(i):
        out *= (a + j) / (a + b + j)
    return out


def truth(a: float, b: float, k: int) -> dict[str, float]:
    per_draft = sum(beta_moment(a, b, i) for i in range(1, k + 1))
    return {"mean_acceptance_length": 1.0 + per_draft, "acceptance_rate": per_draft / k,
            "per_position[0]": beta_moment(a, b, 1)}


def unit(rng: np.random.Generator, a: float, b: float, k: int, lo: int, hi: int) -> AcceptanceProfile:
    p = rng.beta(a, b)
    drafts = int(rng.integers(lo, hi + 1))
    # accepted prefix length of each draft: number of leading successes, capped at k
    lengths = np.minimum(rng.geometric(1.0 - p, size=drafts) - 1, k) if p < 1 else np.full(drafts, k)
    per_pos = tuple(int((lengths > i).sum()) for i in range(k))
    return AcceptanceProfile(drafts, drafts * k, int(lengths.sum()), per_pos, k)


def coverage(trials: int, resamples: int, seed: int) -> dict[str, dict[int, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    out: dict[str, dict[int, dict[str, float]]] = {}
    for label, a, b, k, lo, hi in SCENARIOS:
        true = truth(a, b, k)
        rows: dict[int, dict[str, float]] = {}
        for n in UNITS:
            hits = dict.fromkeys(FIGURES, 0)
            for t in range(trials):
                units = [unit(rng, a, b, k, lo, hi) for _ in range(n)]
                iv = bootstrap_intervals(units, resamples=resamples, seed=t, min_units=1)
                for f in FIGURES:
                    if f in iv and iv[f].low <= true[f] <= iv[f].high:
                        hits[f] += 1
            rows[n] = {f: hits[f] / trials for f in FIGURES}
            print(f"{label:48s} n={n:4d}  " + "  ".join(f"{f} {rows[n][f]:.3f}" for f in FIGURES),
                  file=sys.stderr, flush=True)
        out[label] = rows
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "interval_coverage")
    args = ap.parse_args()
    t0 = time.time()
    cov = coverage(args.trials, args.resamples, args.seed)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
            "python": platform.python_version(), "trials": args.trials,
            "resamples": args.resamples, "seed": args.seed, "seconds": round(time.time() - t0, 1)}
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "coverage": cov}, indent=1) + "\n")
    lines = [f"interval coverage ({meta['date']}, commit {commit}, {args.trials} trials per cell, "
             f"{args.resamples} bootstrap resamples, seed {args.seed})",
             "python benchmarks/interval_coverage.py " + " ".join(sys.argv[1:]), "",
             "share of trials whose 95% bootstrap interval holds the true value (nominal 0.95)"]
    for label, rows in cov.items():
        lines += ["", label, "units  " + "  ".join(f"{f:>24s}" for f in FIGURES)]
        for n, r in rows.items():
            lines.append(f"{n:5d}  " + "  ".join(f"{r[f]:24.3f}" for f in FIGURES))
    args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
