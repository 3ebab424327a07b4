"""False alarms of ``specdoctor gate``: one lab server gated against its own baseline 20 times.

    python benchmarks/gate_false_alarm.py [--budget ci] [--gates 20] [--fixture]

One boot of the lab server of benchmarks/gate_demo.py (the trained EAGLE3 head at k=4, with the
cpu-sampler-fix pack); a baseline ``bench --url`` with that script's cells (seed 0), saved and
exported; then ``gate --baseline FILE --url``
again and again on the same server, each time with sampled streams of its own (``--seed``
1000, 2000, …: 16 requests a cell use seeds s … s+15, so no two gates share a stream): new
measurements of an unchanged server. Every failing gate is a false alarm. Greedy cells repeat
exactly on an unchanged server, so the noise the gate must see through is in the sampled
cells.

Writes benchmarks/results/gate_false_alarm.txt (the tally, each gate's smallest p against its
Holm level, commit, date, machine, load) and .json (each gate's JSON); with --fixture also
tests/fixtures/gate/self-gates.json: the baseline and every gate's measurement, as baseline
documents (the pool of tests/gate/test_compare_recorded.py).

From that pool (no server: ``--render`` recomputes it from the committed files), every ordered
pair of the 21 measurements is gated with the comparison as it is and with the family-wise
control taken away (each test at alpha on its own, Bonferroni), and the single tests' p-values
are tallied against their nominal rate: how far the false-alarm figure owes to Holm, and how
conservative the single tests are.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from _gate_session import RESULTS, ROOT, Session, bench_run_id, log

from gate_demo import CELLS, K, METHOD, lab_args

FIXTURE = ROOT / "tests" / "fixtures" / "gate" / "self-gates.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="ci", choices=["ci", "full"])
    ap.add_argument("--gates", type=int, default=20)
    ap.add_argument("--fixture", action="store_true",
                    help="also write every measurement to tests/fixtures/gate/self-gates.json")
    ap.add_argument("--render", action="store_true",
                    help="no server: recompute the pairwise figures from the committed pool and "
                         "rewrite the .txt and .json")
    args = ap.parse_args(argv)
    if args.render:
        return render()

    from _provenance import git_commit, load, machine, utc_now

    from specdoctor.launch import free_port

    t0 = time.perf_counter()
    s = Session("gate-false-alarm-")
    port = str(free_port())
    url = f"http://127.0.0.1:{port}"
    meta: dict[str, Any] = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
                            "load_at_start": load(), "method": METHOD, "k": K,
                            "budget": args.budget, "cells": " ".join(CELLS)}
    gates: list[dict[str, Any]] = []
    runs: list[int] = []
    up = s.run("lab", "up", *lab_args(args.budget), "--port", port, timeout=3600)
    if up["returncode"]:
        return 1
    try:
        runs.append(bench_run_id(s.run("bench", "--url", url, *CELLS, "--no-report")))
        s.run("gate", "--save", "self")
        s.run("gate", "--export", "self", "self.json")
        for i in range(args.gates):
            seed = str(1000 * (i + 1))
            step = s.run("gate", "--baseline", "self.json", "--url", url, "--seed", seed,
                         "--json", timeout=3600)
            runs.append(bench_run_id(step))
            gates.append(summary(step, seed))
            log(f"gate {i + 1}: exit {step['returncode']}, smallest p "
                f"{gates[-1]['smallest_p']} (Holm level {gates[-1]['its_level']})")
    finally:
        s.run("lab", "down", "--port", port)
    meta["load_at_end"] = load()
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    passed = sum(g["exit"] == 0 for g in gates)
    meta["passed"], meta["gates"] = passed, len(gates)
    if args.fixture:
        write_fixture(s, runs, meta)
    RESULTS.mkdir(parents=True, exist_ok=True)
    res = {"meta": meta, "gates": gates, "pairs": pairs() if FIXTURE.is_file() else None,
           "steps": s.steps}
    (RESULTS / "gate_false_alarm.json").write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "gate_false_alarm.txt").write_text(text(meta, gates, res["pairs"]))
    log(f"{passed} of {len(gates)} self-gates passed; wrote benchmarks/results/"
        f"gate_false_alarm.txt and .json ({meta['wall_s']} s)")
    return 0 if passed >= len(gates) - len(gates) // 20 else 1


def summary(step: dict[str, Any], seed: str) -> dict[str, Any]:
    out: dict[str, Any] = {"seed": seed, "exit": step["returncode"], "seconds": step["seconds"],
                           "load_before": step["load_before"], "load_after": step["load_after"]}
    try:
        res = json.loads(step["stdout"])
    except ValueError:
        return {**out, "error": step["stderr"][-500:], "smallest_p": None, "its_level": None}
    tested = [t for t in res["comparison"]["tests"] if t["p"] is not None]
    low = min(tested, key=lambda t: t["p"]) if tested else None
    out.update(tests=len(tested), smallest_p=low and low["p"],
               its_level=low and low["holm_threshold"],
               smallest_p_at=low and f"{low['cell']} {low['figure']}",
               regressions=[f"{t['cell']} {t['figure']}" for t in res["comparison"]["regressions"]],
               significant=[f"{t['cell']} {t['figure']} {t['outcome']}" for t in tested
                            if t["outcome"] not in ("within noise",)],
               run_id=res["candidate"]["run_id"])
    return out


def write_fixture(s: Session, runs: list[int], meta: dict[str, Any]) -> None:
    docs = []
    for i, run_id in enumerate(runs):
        s.run("gate", "--save", f"m{i}", str(run_id), keep=False)
        out = s.work / f"m{i}.json"
        s.run("gate", "--export", f"m{i}", str(out), keep=False)
        docs.append(json.loads(out.read_text()))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps({
        "recorded": (f"benchmarks/gate_false_alarm.py --budget {meta['budget']} --fixture, commit {meta['commit']}, {meta['date']}: "
                     f"one lab server ({meta['method']}, k={meta['k']}); measurement 0 is the "
                     "baseline bench run (seed 0), measurement i the candidate of gate i "
                     "(seed 1000 i); each is a gate baseline document"),
        "measurements": docs}) + "\n")


def pairs(alpha: float = 0.05) -> dict[str, Any]:
    """Every ordered pair of the pool's measurements gated: as the gate does (Holm), and with
    the family-wise control removed (a regression at p <= alpha on its own) or Bonferroni."""
    import itertools

    from specdoctor.gate import baseline as bl
    from specdoctor.gate.compare import MAX_DROP, compare

    doc = json.loads(FIXTURE.read_text())
    ms = [bl.from_json(d, f"measurement {i}") for i, d in enumerate(doc["measurements"])]
    alarms = {"holm": 0, "uncorrected": 0, "bonferroni": 0}
    ps: list[float] = []
    n = 0
    for i, j in itertools.permutations(range(len(ms)), 2):
        # the unpaired test these figures were measured with; the paired test that the gate
        # now uses where prompts are shared is measured by benchmarks/gate_paired.py
        cmp = compare(ms[i].samples(), ms[j].samples(), alpha=alpha, paired_test=False)
        n += 1
        tested = cmp.tested
        drops = [t for t in tested if t.change is not None and -t.change > MAX_DROP]
        alarms["holm"] += not cmp.passed
        alarms["uncorrected"] += any(t.p <= alpha for t in drops)  # type: ignore[operator]
        alarms["bonferroni"] += any(t.p <= alpha / len(tested) for t in drops)  # type: ignore[operator]
        ps += [t.p for t in tested if t.p is not None and t.p < 1]
    return {"measurements": len(ms), "pairs": n, "alpha": alpha, "alarms": alarms,
            "single_tests_with_noise": len(ps),
            "share_below": {str(a): round(sum(p <= a for p in ps) / len(ps), 4)
                            for a in (0.05, 0.01)} if ps else None,
            "smallest_p": min(ps) if ps else None}


def render() -> int:
    path = RESULTS / "gate_false_alarm.json"
    res = json.loads(path.read_text())
    res["pairs"] = pairs()
    path.write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "gate_false_alarm.txt").write_text(text(res["meta"], res["gates"], res["pairs"]))
    log("rewrote benchmarks/results/gate_false_alarm.txt and .json from the committed pool")
    return 0


def text(meta: dict[str, Any], gates: list[dict[str, Any]],
         pair: dict[str, Any] | None = None) -> str:
    lines = [__doc__.splitlines()[0],
             (f"commit {meta['commit']}, {meta['date']}; {meta['machine']}; load average "
              f"{meta['load_at_start']} at start, {meta['load_at_end']} at end; "
              f"{meta['wall_s']} s in all"),
             (f"lab {' '.join(lab_args(meta['budget']))}; "
              f"cells: {meta['cells']}"),
             "",
             f"passed: {meta['passed']} of {meta['gates']} self-gates (exit 0)",
             "",
             "gate  seed   exit  tests  smallest p  its Holm level  where                  "
             "load  seconds  not within noise"]
    for i, g in enumerate(gates, 1):
        lines.append(f"{i:>4}  {g['seed']:>5}  {g['exit']:>4}  {g.get('tests', '—'):>5}  "
                     f"{_g(g['smallest_p']):>10}  {_g(g['its_level']):>14}  "
                     f"{(g.get('smallest_p_at') or '—'):<22} {g['load_before']:>5}  "
                     f"{g['seconds']:>7}  {', '.join(g.get('significant') or []) or '—'}")
    if pair:
        a = pair["alarms"]
        lines += ["", f"every ordered pair of the {pair['measurements']} measurements (the "
                      f"baseline and the 20 candidates, tests/fixtures/gate/self-gates.json) "
                      f"gated with the unpaired test (the paired one: benchmarks/gate_paired.txt), "
                      f"alpha {pair['alpha']}:",
                  f"  unpaired (MOVER), Holm:               {a['holm']:>3} of {pair['pairs']} "
                  f"pairs fail ({a['holm'] / pair['pairs']:.1%})",
                  f"  Bonferroni:                           {a['bonferroni']:>3} of "
                  f"{pair['pairs']} ({a['bonferroni'] / pair['pairs']:.1%})",
                  f"  no family-wise control (each at alpha): {a['uncorrected']:>3} of "
                  f"{pair['pairs']} ({a['uncorrected'] / pair['pairs']:.1%})",
                  f"  single tests with noise (p < 1): {pair['single_tests_with_noise']}; share "
                  f"with p <= 0.05: {pair['share_below']['0.05']:.1%}, p <= 0.01: "
                  f"{pair['share_below']['0.01']:.1%}; smallest p {pair['smallest_p']:.2g}"]
    return "\n".join(lines) + "\n"


def _g(x: float | None) -> str:
    return "—" if x is None else f"{x:.2g}"


if __name__ == "__main__":
    sys.exit(main())
