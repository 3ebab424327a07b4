"""The gate's paired test on recorded runs: its false-alarm rate, and the smallest drop it catches.

    python benchmarks/gate_paired.py [--pairs N]

No server. The pool is tests/fixtures/gate/self-gates.json: one unchanged lab server (the
trained EAGLE3 head at k=4, code and essay prompts x greedy and sampled at temperature 0.5 x
concurrency 4, 16 requests a cell, 64 tokens) measured 21 times, measurement 0 with seeds
0..15 and measurement i with seeds 1000 i .. 1000 i + 15, so each sampled cell is 21
independent repeats of the same 16 prompt slots, and every greedy cell replays one stream.
Each request's prompt and seed come from its position (the bench client stores a cell's
requests in index order; every cell has its 16 requests), as the baseline loader recovers them
(``gate.baseline.infer_keys``).

The gate modelled is the gate as it now is for these runs: every candidate of the pool was
measured by URL (a server specdoctor did not start, with no spec-off measurement of its own), so
its acceptance is tested (mean acceptance length and the per-position rates, 11 tests in the
pool's first pair; Holm's strictest level 0.05 / 11) and its speedup over the baseline's
spec-off is reported in a note, not tested (``gate.run._judge``: ``compare(..., speed=False)``).
Part 3 measures what testing that speedup would give, the reason the gate reports it.

1. False alarms. Every unordered pair of the 21 measurements (210; the paired test is
   symmetric in its two sides, so the ordered pairs would count each twice) is gated as the
   gate does, paired over prompts, and with the paired test turned off (the unpaired MOVER
   test of earlier versions). Tallied: the share of single acceptance tests with p <= 0.05
   (nominal 5%) and <= 0.01, over the sampled cells (the greedy cells replay the same stream on
   an unchanged server: every paired difference is 0 and p is 1), and the gates that fail
   (on what the gate tests: acceptance). The 210 pairs are not independent (each measurement
   is in 20 of them); a round-robin schedule splits them into 21 rounds of 10 disjoint pairs
   (each round: 10 independent self-gates), and the rate is given per round as min / median /
   max. Why under nominal: per sampled cell and figure, its variance between the 21 runs
   against the one it would have if a run's requests were independent.
2. The smallest drop caught. In 70 of the pairs (``--pairs``) the second measurement gets a
   drop injected: each accepted token is lost with probability d (per-position counts thinned
   binomially; drafts unchanged), d chosen so that the figure drops by X; the paired test is
   run at Holm's strictest level of the gate (0.05 / its number of tests: 11). Per cell and
   figure, the share of pairs where the drop is called, and the smallest X on the grid called
   in at least 80% of them. The same injected drops go through the unpaired test (MOVER, the
   candidate's bootstrap interval recomputed) for comparison.
3. The speedup over a shared spec-off, were it tested. The spec-off side is
   tests/fixtures/gate/spec-off.json, one run of the same lab server (same flags, models, cells
   and seed) with speculation on and off (``--record-spec-off``, below). It was measured on
   another day and another machine than the pool, so the speedups it makes with the pool's
   tok/s are not the server's speedup (the ratio's value is not comparable); what the test
   uses of it is its spread. Every measurement's cells are given its spec-off tok/s as their
   ``spec_off_tok_s``, on both sides of every pair: a URL candidate's speedup is over the
   baseline's own spec-off, and this is what testing it would be (as the gate did before it
   reported it). The gate then has one speedup test a cell more (4; 15 tests in the first
   pair, strictest level 0.05 / 15). Measured: the speedup test's single false alarms (every
   cell: tok/s varies in greedy cells too; min / median / max per round), the self-gates that
   would fail with it in the Holm family and on what, why it fires (per cell, the variance of
   log tok/s between the 21 runs against the one a run's own interval gives it), and its
   smallest drop caught: every request's tok/s of the second measurement scaled by 1 − X (its
   tok/s spread scales alike: one repeat, the aggregate with the mean per-stream interval
   scaled to it), tested as the gate tests a speedup (unpaired, MOVER on log tok/s) at the
   level the gate would have with the speedups counted (0.05 / 15); the share called is also
   given with no drop injected (X = 0), as a drop called there is a false alarm.

Writes benchmarks/results/gate_paired.txt and .json (commit, date, machine).

``--record-spec-off`` (a server, minutes; ``--budget``, default ci as the pool): ``lab up``
with the pool's flags (``--method eagle3 --k 4 --train-budget ci --patch cpu-sampler-fix``)
prints its vLLM command and is stopped; ``bench --launch COMMAND --baseline`` with the pool's
cells and seed 0 runs that command with speculation on, and with its speculative config
removed, off (one server at a time); ``gate --save`` and ``--export`` make the run a baseline
document with a spec-off tok/s per cell, written to tests/fixtures/gate/spec-off.json with a
``recorded`` note (the command, commit, date, machine, load and every step).

``--demo``: the three recorded candidates of docs/gate.md (tests/fixtures/gate/demo-*.json:
the same server, a served fault, a bfloat16 boot, each measured with seed 1000 against the
seed-0 baseline) compared as the gate now does, and its text as the gate prints it, less the
candidate line (the server, run id and load of a live gate); writes
benchmarks/results/gate_paired_demo.txt. No server: the measurements are the recorded ones.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _provenance import git_commit, load, machine, utc_now  # noqa: E402

from specdoctor.acceptance.profile import AcceptanceProfile  # noqa: E402
from specdoctor.bench.stats import Spread  # noqa: E402
from specdoctor.gate import baseline as bl  # noqa: E402
from specdoctor.gate import paired  # noqa: E402
from specdoctor.gate.compare import (  # noqa: E402
    ALPHA, MIN_POSITION_RATE, CellSample, acceptance_estimates, cell_pairs, compare, mover_p,
    speedup_estimate,
)

FIXTURE = ROOT / "tests" / "fixtures" / "gate" / "self-gates.json"
SPEC_OFF = ROOT / "tests" / "fixtures" / "gate" / "spec-off.json"
RESULTS = ROOT / "benchmarks" / "results"
DROPS = (0.01, 0.02, 0.03, 0.05, 0.075, 0.10, 0.15, 0.20, 0.30, 0.50)
POWER = 0.8


Pool = list[list[CellSample]]  # per measurement, its cells as the gate compares them


def spec_off() -> dict[str, Spread]:
    """Each cell's recorded spec-off tok/s (tests/fixtures/gate/spec-off.json)."""
    b = bl.from_json(json.loads(SPEC_OFF.read_text()), "spec-off.json")
    off = {s.cell: s.spec_off_tok_s for s in b.samples()}
    missing = sorted(c for c, v in off.items() if v is None)
    if missing:
        raise SystemExit(f"spec-off.json has no spec-off tok/s in {', '.join(missing)}")
    return off  # type: ignore[return-value]


def pool() -> Pool:
    """The 21 measurements, each cell given the recorded spec-off tok/s as its
    ``spec_off_tok_s``, on both sides of every pair: a URL candidate's speedup would be over the
    baseline's own spec-off. Only part 3 tests it; the gate as it now is (parts 1 and 2)
    compares a URL candidate with ``speed=False``, where the spec-off is not looked at."""
    doc = json.loads(FIXTURE.read_text())
    ms = [bl.from_json(d, f"self-gates.json measurement {i}")
          for i, d in enumerate(doc["measurements"])]
    off = spec_off()
    for i, m in enumerate(ms):
        for c in m.cells:
            if c.sample.keys is None:
                raise SystemExit(f"measurement {i} {c.sample.cell}: request keys not recovered")
            if c.sample.cell not in off:
                raise SystemExit(f"spec-off.json has no cell {c.sample.cell}")
    return [[replace(c, spec_off_tok_s=off[c.cell]) for c in m.samples()] for m in ms]


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """n (odd) players: n rounds, each pairing n − 1 of them (one sits out); every pair once."""
    players = list(range(n)) + [-1]
    rounds = []
    for _ in range(n):
        half = len(players) // 2
        rounds.append([tuple(sorted((a, b))) for a, b in zip(players[:half], players[::-1][:half])
                       if a >= 0 and b >= 0])
        players = [players[0]] + [players[-1]] + players[1:-1]
    return rounds


def tally(per_pair: dict[tuple[int, int], list[float]], n: int) -> dict[str, Any]:
    """Single tests' p-values against their nominal rate, overall and per round."""
    ps = [p for v in per_pair.values() for p in v]
    rounds = [[p for pr in rnd for p in per_pair[pr]] for rnd in round_robin(n)]
    per_round = [sum(p <= 0.05 for p in r) / len(r) for r in rounds]
    return {"tests": len(ps), "share_p_le_0.05": sum(p <= 0.05 for p in ps) / len(ps),
            "share_p_le_0.01": sum(p <= 0.01 for p in ps) / len(ps), "smallest_p": min(ps),
            "rounds": len(rounds), "round_pairs": len(rounds[0]),
            "per_round_0.05": {"min": min(per_round), "median": statistics.median(per_round),
                               "max": max(per_round)}}


def false_alarms(ms: Pool) -> dict[str, Any]:
    """The gate as it now is for a URL candidate (``speed=False``: acceptance only), paired and
    with the paired test off, over every self-pair."""
    out: dict[str, Any] = {}
    pairs = list(itertools.combinations(range(len(ms)), 2))
    for name, on in (("paired", True), ("unpaired", False)):
        per_pair: dict[tuple[int, int], list[float]] = {}
        gate_fails, tests_paired, all_tests = 0, 0, 0
        for i, j in pairs:
            cmp = compare(ms[i], ms[j], paired_test=on, speed=False)
            assert not any(t.figure == "speedup" for t in cmp.tests)
            gate_fails += not cmp.passed
            sampled = [t for t in cmp.tested if "/greedy/" not in t.cell]
            per_pair[(i, j)] = [t.p for t in sampled if t.p is not None]
            tests_paired += sum(t.method.name == "paired" for t in cmp.tested)
            all_tests += len(cmp.tested)
        acc = tally(per_pair, len(ms))
        out[name] = {"pairs": len(pairs), "gates_failed": gate_fails, "tests": all_tests,
                     "tests_paired": tests_paired, "sampled_tests": acc.pop("tests"), **acc}
    return out


def speedup_false_alarms(ms: Pool) -> dict[str, Any]:
    """Were a URL candidate's speedup over the baseline's spec-off tested (``speed=True``, both
    sides over the recorded spec-off, as the gate did before it reported it): its single tests
    over every self-pair and cell, and the self-gates that would fail with the speedups in the
    Holm family, on what. The speedup test is unpaired in any case (tok/s is per cell)."""
    pairs = list(itertools.combinations(range(len(ms)), 2))
    speed: dict[tuple[int, int], list[float]] = {}
    gate_fails, speed_fails, acc_fails, all_tests = 0, 0, 0, 0
    for i, j in pairs:
        cmp = compare(ms[i], ms[j], speed=True)
        gate_fails += not cmp.passed
        speed_fails += any(t.figure == "speedup" for t in cmp.regressions)
        acc_fails += any(t.figure != "speedup" for t in cmp.regressions)
        speed[(i, j)] = [t.p for t in cmp.tested if t.figure == "speedup" and t.p is not None]
        all_tests += len(cmp.tested)
    return {"pairs": len(pairs), "tests_with_speedups": all_tests,
            "gates_failed": gate_fails, "gates_failed_by_acceptance": acc_fails,
            "gates_failed_by_speedup": speed_fails, **tally(speed, len(ms))}


def speed_spread(ms: Pool) -> list[dict[str, Any]]:
    """Per cell: how far its tok/s (with speculation) moves between the 21 runs, against what
    one run's interval says (the half-widths of its spread on the log scale, / 1.96: the
    standard error the speedup test takes for it), as variances of log tok/s."""
    import math

    out = []
    for ci, c0 in enumerate(ms[0]):
        logs, ses = [], []
        for m in ms:
            t = m[ci].tok_s
            assert t is not None
            logs.append(math.log(t.value))
            ses.append((math.log(t.high) - math.log(t.low)) / 2 / 1.959963984540054)
        between = statistics.variance(logs)
        within = statistics.fmean(x * x for x in ses)
        values = [m[ci].tok_s.value for m in ms]  # type: ignore[union-attr]
        out.append({"cell": c0.cell, "tok_s_min": min(values), "tok_s_max": max(values),
                    "between_runs": between, "in_one_run": within, "ratio": between / within})
    return out


def dependence(ms: Pool) -> list[dict[str, Any]]:
    """Per sampled cell and figure: the variance of the cell's figure between the 21 runs,
    against the variance it would have if the requests of a run were independent (from each
    prompt slot's spread over the 21 runs, linearised: var(sum A − R sum D) / (sum D)^2). A
    ratio under 1: requests of one run vary together less than independent ones would (the
    sign-flip permutation, which swaps slots independently, is then conservative)."""
    import numpy as np

    out = []
    for ci, c0 in enumerate(ms[0]):
        if "/greedy/" in c0.cell:
            continue
        d = np.array([[u.drafts for u in m[ci].units or ()] for m in ms], float)
        for fig in gated_figures(c0):
            col = paired.column(fig)
            num = np.array([[u.accepted_tokens if col == 1 else
                             (u.accepted_per_position or ())[col - 2]
                             for u in m[ci].units or ()] for m in ms], float)
            r = num.sum(1) / d.sum(1)
            z = num - (num.sum() / d.sum()) * d
            independent = z.var(0, ddof=1).sum() / d.sum(1).mean() ** 2
            out.append({"cell": c0.cell, "figure": fig, "between_runs": float(r.var(ddof=1)),
                        "if_independent": float(independent),
                        "ratio": float(r.var(ddof=1) / independent)})
    return out


def simulated(trials: int = 2000) -> dict[str, float]:
    """The sign-flip test on simulated pairs whose requests ARE independent (16 prompt slots,
    each with its own rate 0.1–0.3, 40–60 drafts a request, binomial acceptance): how often
    p <= 0.05 and <= 0.01 where nothing changed. Checks the test itself, not the server."""
    import numpy as np

    rng = np.random.default_rng(1)
    ps = []
    for _ in range(trials):
        d = rng.integers(40, 61, size=(16, 2))
        a = rng.binomial(d, rng.uniform(0.1, 0.3, size=(16, 1)))
        pr = paired.Pairs(tuple((float(d[i, 0]), float(a[i, 0])) for i in range(16)),
                          tuple((float(d[i, 1]), float(a[i, 1])) for i in range(16)), False)
        ps.append(paired.sign_flip_p(pr, "mean_acceptance_length"))
    return {"trials": trials, "share_p_le_0.05": sum(p <= 0.05 for p in ps) / trials,
            "share_p_le_0.01": sum(p <= 0.01 for p in ps) / trials}


def thin(units: tuple[AcceptanceProfile, ...], d: float, rng: Any) -> tuple[AcceptanceProfile, ...]:
    """Each accepted token lost with probability d, position by position (drafts unchanged)."""
    out = []
    for u in units:
        pos = tuple(int(rng.binomial(a, 1.0 - d)) for a in (u.accepted_per_position or ()))
        out.append(AcceptanceProfile(u.drafts, u.draft_tokens, sum(pos), pos, u.k))
    return tuple(out)


def gated_figures(b: CellSample) -> list[str]:
    est = acceptance_estimates(b)
    return [f for f, e in est.items()
            if f == "mean_acceptance_length" or e.value >= MIN_POSITION_RATE]


def scaled_tok_s(t: Spread, x: float) -> Spread:
    """A cell's tok/s with every request's tok/s scaled by 1 − x: with one repeat the spread is
    the aggregate tok/s and the mean per-stream interval scaled to it (``bench.stats.spread``),
    so value and interval scale alike."""
    return Spread(t.value * (1 - x), t.low * (1 - x), t.high * (1 - x), t.basis)


def speedup_drops(ms: Pool, pairs: list[tuple[int, int]], level: float) -> dict[str, Any]:
    """Per cell: the second measurement's tok/s dropped by X (every request's tok/s scaled),
    both sides over the recorded spec-off, the speedup tested as the gate tests it (unpaired,
    MOVER on the log scale) at ``level``; the share of pairs where the drop is called, with no
    drop injected (X = 0: how often noise alone is called a drop at this level) and on the
    grid, and the smallest X called in >= POWER of them."""
    out: dict[str, Any] = {}
    for ci, b0 in enumerate(ms[0]):
        caught = {x: 0 for x in (0.0, *DROPS)}
        for i, j in pairs:
            b, c = ms[i][ci], ms[j][ci]
            assert b.tok_s is not None and c.tok_s is not None
            eb = speedup_estimate(b.tok_s, b.spec_off_tok_s)
            assert eb is not None and eb.has_interval
            for x in caught:
                ec = speedup_estimate(scaled_tok_s(c.tok_s, x), c.spec_off_tok_s)
                assert ec is not None and ec.has_interval
                caught[x] += ec.value < eb.value and mover_p(eb, ec, log_scale=True) <= level
        share = {str(x): n / len(pairs) for x, n in caught.items()}
        out[b0.cell] = {"cell": b0.cell, "figure": "speedup", "caught_share": share,
                        "x80": next((x for x in DROPS if caught[x] >= POWER * len(pairs)),
                                    None)}
        print(f"  {b0.cell} speedup: {out[b0.cell]['x80']} (no drop: {share['0.0']:.0%})",
              file=sys.stderr, flush=True)
    return out


def smallest_drops(ms: Pool, n_pairs: int) -> dict[str, Any]:
    """Drops injected into the second measurement of ``n_pairs`` self-pairs (evenly spread
    over the 210), caught or not by the paired test and by the unpaired one, at Holm's
    strictest level of the gate as it now is for a URL candidate (acceptance only: 0.05 / 11);
    and the speedup's, at the level the gate would have with the speedups counted (0.05 / 15)."""
    import numpy as np

    rng = np.random.default_rng(0)
    pairs = drop_pairs(len(ms), n_pairs)
    m = len(compare(ms[0], ms[1], speed=False).tested)
    level = ALPHA / m
    tally: dict[str, dict[str, dict[float, int | None]]] = {}
    info: dict[str, dict[str, Any]] = {}
    for ci, b0 in enumerate(ms[0]):
        figs = gated_figures(b0)
        pr0, _ = cell_pairs(b0, ms[1][ci])
        assert pr0 is not None
        for fig in figs:
            key = f"{b0.cell} {fig}"
            info[key] = {"cell": b0.cell, "figure": fig, "prompt_pairs": pr0.n,
                         "smallest_p": paired.smallest_p(pr0.n)}
            tally[key] = {t: {x: 0 for x in DROPS} for t in ("paired", "unpaired")}
        for i, j in pairs:
            b, c = ms[i][ci], ms[j][ci]
            assert c.units is not None
            eb, ec = acceptance_estimates(b), acceptance_estimates(c)
            share = (ec["mean_acceptance_length"].value - 1) / ec["mean_acceptance_length"].value
            for x in DROPS:
                thinned = {"pos": x, "mean": x / share}
                cands = {kind: replace(c, units=thin(c.units, d, rng)) if d <= 1 else None
                         for kind, d in thinned.items()}
                ests = {kind: acceptance_estimates(cs) if cs is not None else None
                        for kind, cs in cands.items()}
                for fig in figs:
                    key, kind = f"{b.cell} {fig}", ("mean" if fig == "mean_acceptance_length"
                                                    else "pos")
                    cd, est = cands[kind], ests[kind]
                    if cd is None or est is None:  # more than the figure can drop
                        tally[key]["paired"][x] = tally[key]["unpaired"][x] = None
                        continue
                    pr, why = cell_pairs(b, cd)
                    if pr is None:
                        raise SystemExit(f"{c.cell}: not paired ({why})")
                    dropped = est[fig].value < eb[fig].value
                    unpaired = est[fig].has_interval and mover_p(eb[fig], est[fig]) <= level
                    # the gate: paired where a swap pattern can reach the level, else unpaired
                    gate = (paired.sign_flip_p(pr, fig) <= level
                            if paired.smallest_p(pr.n) <= level else unpaired)
                    if tally[key]["paired"][x] is not None:
                        tally[key]["paired"][x] += gate and dropped  # type: ignore[operator]
                    if tally[key]["unpaired"][x] is not None:
                        tally[key]["unpaired"][x] += unpaired and dropped  # type: ignore[operator]
        for fig in figs:
            key = f"{b0.cell} {fig}"
            for t in ("paired", "unpaired"):
                counts = tally[key][t]
                info[key][t] = {
                    "caught_share": {str(x): None if n is None else n / len(pairs)
                                     for x, n in counts.items()},
                    "x80": next((x for x, n in counts.items()
                                 if n is not None and n >= POWER * len(pairs)), None)}
            print(f"  {key}: paired {info[key]['paired']['x80']}, unpaired "
                  f"{info[key]['unpaired']['x80']}", file=sys.stderr, flush=True)
    return {"pairs": len(pairs), "level": level, "tests_in_gate": m, "power": POWER,
            "drops": list(DROPS), "cells": info}


def drop_pairs(n: int, n_pairs: int) -> list[tuple[int, int]]:
    """``n_pairs`` of the self-pairs, evenly spread over them."""
    every = list(itertools.combinations(range(n), 2))
    return every[:: max(1, len(every) // n_pairs)][:n_pairs]


def speedup_part(ms: Pool, n_pairs: int) -> dict[str, Any]:
    """Part 3: the speedup over the shared spec-off, were it tested: false alarms, why it fires,
    and its smallest drop caught at Holm's strictest level of a gate with the speedups counted."""
    tested = compare(ms[0], ms[1], speed=True).tested
    m = len(tested)
    level = ALPHA / m
    pairs = drop_pairs(len(ms), n_pairs)
    return {"false_alarms": speedup_false_alarms(ms), "spread": speed_spread(ms),
            "drops": {"pairs": len(pairs), "level": level, "tests_in_gate": m,
                      "speedup_tests_in_gate": sum(t.figure == "speedup" for t in tested),
                      "power": POWER, "drops": list(DROPS),
                      "cells": speedup_drops(ms, pairs, level)}}


def text(meta: dict[str, Any], fa: dict[str, Any], sd: dict[str, Any],
         dep: list[dict[str, Any]], sim: dict[str, float], sp: dict[str, Any]) -> str:
    p, u = fa["paired"], fa["unpaired"]
    sf, spd, sdr = sp["false_alarms"], sp["spread"], sp["drops"]
    lines = [__doc__.splitlines()[0],
             f"commit {meta['commit']}, {meta['date']}; {meta['machine']}; load average "
             f"{meta['load_at_start']} at start, {meta['load_at_end']} at end; "
             f"{meta['wall_s']} s in all",
             f"pool: {meta['pool']}",
             f"the gate as it now is for these runs: every candidate measured by URL (no "
             f"spec-off of its own), so its acceptance is tested ({sd['tests_in_gate']} tests in "
             f"the first pair; Holm's strictest level 0.05 / {sd['tests_in_gate']} = "
             f"{sd['level']:.2g}) and its speedup over the baseline's spec-off is reported, not "
             "tested; 3. is what testing it would give",
             "",
             f"1. false alarms: {p['pairs']} self-pairs (every unordered pair of the 21 "
             "measurements) gated as the gate gates a URL candidate (acceptance only); single "
             "tests in the sampled cells (greedy cells replay: p = 1); a round is 10 disjoint "
             "pairs (21 rounds)",
             "                                     the gate (paired)   unpaired (MOVER)"]

    def row(label: str, a: str, b: str = "") -> str:
        return f"  {label:<35}{a:>17}   {b:>16}".rstrip()

    def rnd(x: dict[str, Any]) -> str:
        return " / ".join(f"{x['per_round_0.05'][k]:.1%}" for k in ("min", "median", "max"))

    def rates(a: dict[str, Any], b: dict[str, Any] | None) -> list[str]:
        return [
            row("share with p <= 0.05 (nominal 5%)", f"{a['share_p_le_0.05']:.1%}",
                f"{b['share_p_le_0.05']:.1%}" if b else ""),
            row("share with p <= 0.01 (nominal 1%)", f"{a['share_p_le_0.01']:.1%}",
                f"{b['share_p_le_0.01']:.1%}" if b else ""),
            row("p <= 0.05 per round: min/med/max", rnd(a), rnd(b) if b else ""),
            row("smallest p", f"{a['smallest_p']:.2g}", f"{b['smallest_p']:.2g}" if b else "")]

    lines += [
        row("acceptance: single tests, sampled", str(p["sampled_tests"]),
            str(u["sampled_tests"])),
        *rates(p, u),
        row("gates failed (Holm, alpha 0.05)", f"{p['gates_failed']} of {p['pairs']}",
            f"{u['gates_failed']} of {u['pairs']}"),
        row("tests run paired", f"{p['tests_paired']} of {p['tests']}",
            f"{u['tests_paired']} of {u['tests']}"),
        "",
        "why under 5%: a sampled cell's figure varies between the 21 runs less than it would if "
        "the requests of one run were independent",
        "  cell               figure                   var between runs  var if independent  "
        "ratio"]
    lines += [f"  {d['cell']:<18} {d['figure']:<24} {d['between_runs']:>16.3g}  "
              f"{d['if_independent']:>18.3g}  {d['ratio']:>5.2f}" for d in dep]
    lines += [
        f"  the same test on {sim['trials']} simulated pairs with independent requests (16 "
        f"slots, nothing changed): p <= 0.05 in {sim['share_p_le_0.05']:.1%}, p <= 0.01 in "
        f"{sim['share_p_le_0.01']:.1%}",
        "",
        f"2. smallest drop caught at this baseline size (16 requests a cell): a drop X of the "
        f"figure injected into the second measurement of {sd['pairs']} self-pairs (accepted "
        f"tokens thinned binomially, drafts unchanged), tested at Holm's strictest level of the "
        f"gate, {sd['level']:.2g} (0.05 / {sd['tests_in_gate']} tests, no speedup); the share "
        f"of pairs where it is called, by the gate (paired; unpaired where the prompts are too "
        f"few for the level) / unpaired throughout (MOVER), and the smallest X called in >= "
        f"{sd['power']:.0%} of them (—: more than the figure can drop)",
        "cell               figure                   prompts  min p    "
        + "  ".join(f"{x * 100:>9g}%" for x in sd["drops"]) + "   caught at (gate / unpaired)"]

    def share(c: dict[str, Any], x: float) -> str:
        a, b = c["paired"]["caught_share"][str(x)], c["unpaired"]["caught_share"][str(x)]
        return "—".rjust(10) if a is None else f"{a:.0%}/{b:.0%}".rjust(10)

    def x80(v: float | None) -> str:
        return "none" if v is None else "≥ " + format(v * 100, "g") + "%"

    for c in sd["cells"].values():
        lines.append(f"{c['cell']:<18} {c['figure']:<24} {c['prompt_pairs']:>7}  "
                     f"{c['smallest_p']:<7.2g}  " + "  ".join(share(c, x) for x in sd["drops"])
                     + f"   {x80(c['paired']['x80'])} / {x80(c['unpaired']['x80'])}")
    per_figure: dict[str, list[dict[str, Any]]] = {}
    for c in sd["cells"].values():
        key = "mean acceptance length" if c["figure"] == "mean_acceptance_length" else \
            "per-position rates"
        per_figure.setdefault(key, []).append(c)
    lines += ["", "per figure: the largest over the cells where a drop is caught; the cells "
              "where none is:"]
    for key, cs in per_figure.items():
        for t in ("paired", "unpaired"):
            ok = [c for c in cs if c[t]["x80"]]
            blind = sorted({c["cell"] for c in cs if not c[t]["x80"]})
            worst = max(ok, key=lambda c: c[t]["x80"]) if ok else None
            lines.append(f"  {key}, {'the gate' if t == 'paired' else 'unpaired throughout'}: "
                         f"would catch a drop of "
                         f"{x80(worst[t]['x80']) if worst else 'none'} at this baseline size"
                         + (f" (in {worst['cell']} {worst['figure']})" if worst else "")
                         + (f"; none in {', '.join(blind)}" if blind else ""))
    lines += [
        "",
        "3. the speedup over a shared spec-off, were it tested: what testing a URL candidate's "
        "speedup would give, the reason the gate reports it instead",
        f"spec-off: tests/fixtures/gate/spec-off.json, {meta['spec_off']}; another day and "
        "machine than the pool: every measurement's cells are given its spec-off tok/s, as a URL "
        "candidate's speedup is over the baseline's own spec-off; the speedup's value is not "
        "comparable, its spread is what the test uses",
        f"the speedup tested as the gate tests one (unpaired, MOVER on log tok/s: tok/s is per "
        f"cell), one test a cell, {sdr['speedup_tests_in_gate']} more in the gate "
        f"({sdr['tests_in_gate']} tests in the first pair); over the same {sf['pairs']} "
        "self-pairs",
        row("speedup: single tests, every cell", str(sf["tests"])),
        *rates(sf, None),
        row(f"gates failing (Holm over {sdr['tests_in_gate']} tests)",
            f"{sf['gates_failed']} of {sf['pairs']}"),
        row("  an acceptance figure regressed",
            f"{sf['gates_failed_by_acceptance']} of {sf['pairs']}"),
        row("  the speedup regressed", f"{sf['gates_failed_by_speedup']} of {sf['pairs']}"),
        "",
        "why the speedup test fires: a cell's tok/s (speculation on) moves between the 21 runs "
        "far more than one run's interval says (variances of log tok/s; in one run: the "
        "interval's half-widths / 1.96, squared, the mean over the runs)",
        "  cell               tok/s over the 21 runs  var between runs  var in one run  ratio"]
    lines += [f"  {d['cell']:<18} {d['tok_s_min']:>9.0f} – {d['tok_s_max']:<10.0f}  "
              f"{d['between_runs']:>16.3g}  {d['in_one_run']:>14.3g}  {d['ratio']:>5.1f}"
              for d in spd]
    cells = sdr["cells"]
    lines += [
        "",
        f"its smallest drop caught: every request's tok/s of the second measurement of "
        f"{sdr['pairs']} self-pairs scaled by 1 − X (both sides over the recorded spec-off), "
        f"tested at Holm's strictest level of a gate with the speedups counted, "
        f"{sdr['level']:.2g} (0.05 / {sdr['tests_in_gate']} tests, "
        f"{sdr['speedup_tests_in_gate']} of them speedups); the share of pairs where a drop is "
        f"called, with none injected and per X",
        "cell               figure                      none  "
        + "  ".join(f"{x * 100:>5g}%" for x in sdr["drops"]) + "   caught at"]
    for c in cells.values():
        lines.append(f"{c['cell']:<18} {c['figure']:<24} {c['caught_share']['0.0']:>7.0%}  "
                     + "  ".join(f"{c['caught_share'][str(x)]:>6.0%}" for x in sdr["drops"])
                     + f"   {x80(c['x80'])}")
    ok = [c for c in cells.values() if c["x80"]]
    blind = sorted(c["cell"] for c in cells.values() if not c["x80"])
    worst = max(ok, key=lambda c: c["x80"]) if ok else None
    noise = [c["caught_share"]["0.0"] for c in cells.values()]
    lines.append("  speedup over the shared spec-off, were it tested: "
                 + (f"would catch a drop of {x80(worst['x80'])} at this baseline size (in "
                    f"{worst['cell']})" + (f"; none in {', '.join(blind)}" if blind else "")
                    if worst else
                    f"no drop on the grid (up to {max(sdr['drops']):.0%}) is called in >= "
                    f"{sdr['power']:.0%} of the pairs, in any cell")
                 + f"; with no drop injected it calls one in {min(noise):.0%}–{max(noise):.0%} "
                   f"of them (its false alarms)")
    return "\n".join(lines) + "\n"


def demo() -> int:
    from specdoctor.gate import text as gate_text
    from specdoctor.gate.run import FAIL, PASS, Candidate, GateResult

    fixtures = FIXTURE.parent
    base = bl.load_file(fixtures / "demo-baseline.json")
    out = ["The recorded candidates of docs/gate.md compared as the gate now does (no server: "
           "tests/fixtures/gate/demo-*.json)",
           f"commit {git_commit()}, {utc_now()}; {machine()}", ""]
    for name, what in (("same", "candidate 1, the same server"),
                       ("fault", "candidate 2, a served fault (eagle3-d2t-off-by-one)"),
                       ("noise", "candidate 3, the baseline's command with --dtype bfloat16")):
        doc = json.loads((fixtures / f"demo-{name}.json").read_text())
        cand = bl.from_json(doc, f"demo-{name}.json")
        t0 = time.perf_counter()
        cmp = compare(base.samples(), cand.samples(), sensitivity=True)
        where = doc["target"].get("url") or doc["target"]["label"]
        res = GateResult(base, "gate-baseline.json", Candidate(f"--url {where}", url=where),
                         run_id=doc["source"]["bench_run"], params=base.matrix, comparison=cmp,
                         exit_code=PASS if cmp.passed else FAIL)

        def kept(line: str) -> bool:  # not the live gate's candidate line and commands
            return not (line.startswith(("candidate:", "reproduce:")) or (
                line.startswith(("  code/", "  essay/")) and "specdoctor gate" in line))

        shown = [ln for ln in gate_text.render(res).splitlines() if kept(ln)]
        out += [f"== {what} ({doc['recorded'].split(': ', 1)[-1]}); compared in "
                f"{time.perf_counter() - t0:.1f} s", *shown, ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gate_paired_demo.txt").write_text("\n".join(out))
    print("\n".join(out))
    return 0


def record_spec_off(budget: str) -> int:
    """The spec-off side, measured once through the CLI as the pool was recorded: ``lab up``
    with the pool's flags prints its vLLM command; that server is stopped, and ``bench
    --launch COMMAND --baseline`` runs the command with speculation on and, with the
    speculative config removed, off (one server at a time), over the pool's cells (seed 0);
    ``gate --save`` / ``--export`` make it a baseline document with a spec-off tok/s per
    cell, written to tests/fixtures/gate/spec-off.json with a note of how it was recorded."""
    from _gate_session import Session, bench_run_id
    from gate_demo import CELLS, COMMAND, lab_args

    from specdoctor.launch import free_port

    t0 = time.perf_counter()
    s = Session("gate-spec-off-")
    meta = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
            "load_at_start": load()}
    port = str(free_port())
    up = s.run("lab", "up", *lab_args(budget), "--port", port, timeout=3600)
    try:
        found = COMMAND.search(s.last_output)
    finally:
        s.run("lab", "down", "--port", port)
    if up["returncode"] or found is None:
        raise SystemExit(f"lab up failed (exit {up['returncode']}):\n{s.last_output[-1500:]}")
    command = found.group(1)
    step = s.run("bench", "--launch", command, "--baseline", *CELLS, "--no-report",
                 timeout=3600)
    run_id = bench_run_id(step)
    s.run("gate", "--save", "spec-off", str(run_id))
    out = s.work / "spec-off.json"
    s.run("gate", "--export", "spec-off", str(out))
    if not out.is_file():
        raise SystemExit(f"gate --export wrote nothing:\n{s.last_output[-1500:]}")
    meta["load_at_end"], meta["wall_s"] = load(), round(time.perf_counter() - t0, 1)
    steps = "; ".join(f"{x['command']} (exit {x['returncode']}, {x['seconds']} s)"
                      for x in s.steps)
    doc = json.loads(s.short(out.read_text()))
    doc = {"recorded": (
        f"benchmarks/gate_paired.py --record-spec-off --budget {budget}, commit "
        f"{meta['commit']}, {meta['date']}; {meta['machine']}; load average "
        f"{meta['load_at_start']} at start, {meta['load_at_end']} at end; {meta['wall_s']} s "
        f"in all: the spec-off side of the pool of self-gates.json (not the same day nor "
        f"machine), the lab server of the pool (lab {' '.join(lab_args(budget))}) benched "
        f"with speculation on and off (bench --launch COMMAND --baseline, seed 0), saved as a "
        f"gate baseline; steps: {steps}"), **doc}
    SPEC_OFF.write_text(json.dumps(doc, indent=1) + "\n")
    print(doc["recorded"])
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=70,
                    help="self-pairs for the injected drops, spread over the 210 (default 70)")
    ap.add_argument("--demo", action="store_true",
                    help="the recorded candidates of docs/gate.md as the gate now compares them")
    ap.add_argument("--record-spec-off", action="store_true",
                    help="boot the pool's lab server with speculation on and off and write "
                         "tests/fixtures/gate/spec-off.json (minutes; one server at a time)")
    ap.add_argument("--budget", default="ci", choices=["ci", "full"],
                    help="--record-spec-off: the lab's train budget (the pool's: ci)")
    args = ap.parse_args(argv)
    if args.demo:
        return demo()
    if args.record_spec_off:
        return record_spec_off(args.budget)
    t0 = time.perf_counter()
    meta: dict[str, Any] = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
                            "load_at_start": load(),
                            "pool": json.loads(FIXTURE.read_text())["recorded"]}
    spec_off_doc = json.loads(SPEC_OFF.read_text())
    meta["spec_off"] = spec_off_doc["recorded"].split(" in all: ", 1)[0] + " in all"
    meta["spec_off_measured_at"] = spec_off_doc["source"]["measured_at"]
    ms = pool()
    fa = false_alarms(ms)
    print(json.dumps(fa, indent=1), file=sys.stderr, flush=True)
    dep, sim = dependence(ms), simulated()
    sd = smallest_drops(ms, args.pairs)
    sp = speedup_part(ms, args.pairs)
    meta["load_at_end"] = load()
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gate_paired.json").write_text(json.dumps(
        {"meta": meta, "false_alarms": fa, "dependence": dep, "simulated": sim,
         "smallest_drops": sd, "speedup_if_tested": sp}, indent=1) + "\n")
    out = text(meta, fa, sd, dep, sim, sp)
    (RESULTS / "gate_paired.txt").write_text(out)
    print(out, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
