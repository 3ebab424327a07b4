"""The fault clinic: each trained drafter healthy and with each of its faults, on real vLLM.

    python benchmarks/drafters_faults.py [--budget full] [--methods eagle3,dflash,mtp]
                                         [--controls] [-n 16] [--max-tokens 64]

For every (method, case) — the trained drafter at its trained k, then every fault of the
lab's catalogue for that method (``specdoctor.lab.faults``), then with --controls every
hand-wired control — one lab server is started, measured with specdoctor's protocol (greedy,
the "code" prompts, one warm-up request), and stopped; one server at a time. Beside each
measurement stands the offline prediction from the drafter's reference forward (no server),
so a gap between the two is visible too.

Writes benchmarks/results/drafters_faults.json, .txt and .md (the tables of docs/lab.md;
--render rewrites it from the .json alone), and the recorded profiles of every fault and
healthy drafter (benchmarks/results/faults_recorded.json; nothing in the package reads them).
Per-position rates are unconditional (accepted at position j / drafts); mean acceptance length
counts the bonus token.

Provenance, on every row (healthy, fault, control, offline reference): the run it came from
(``run``: id, commit, date; the run's machine, torch and its CPU capability, vLLM and load
under ``meta.runs``), the sha256 of the weights it read, and for measured rows the 95%
intervals (bootstrap over requests) or the reason there are none. ``--merge`` keeps other
cases' rows from earlier runs only with the same protocol, each still naming its own run, and
says on stderr which runs it kept.
Not a test: it boots 8 servers (13 with --controls), about two minutes each on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RECORDED = RESULTS / "faults_recorded.json"


def run_info() -> dict[str, Any]:
    """Where a row comes from: this invocation's id, commit, date and machine. Every row keeps
    its own, so rows kept by --merge from an older run still say which run they are."""
    import torch

    from _provenance import git_commit, load, machine, utc_now

    commit = git_commit()
    return {"id": f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{commit}",
            "commit": commit, "date": utc_now(), "machine": machine(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "load_at_start": load()}


def weights_sha256(d: Path | None) -> str | None:
    """sha256 of the weights a server read (the published copy's model.safetensors)."""
    if d is None:
        return None
    return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()


def cases(methods: list[str], controls: bool) -> list[dict[str, Any]]:
    from specdoctor.lab import drafters, faults

    out = []
    for m in methods:
        out.append({"case": f"healthy:{m}", "method": m, "fault": None, "control": None,
                    "root_cause": None})
        for f in faults.FAULTS.values():
            if f.method == m:
                out.append({"case": f.id, "method": m, "fault": f.id, "control": None,
                             "root_cause": f.root_cause})
        if controls:
            for name in drafters.CONTROLS[m]:
                out.append({"case": f"control:{m}:{name}", "method": m, "fault": None,
                            "control": name, "root_cause": None})
    return out


def run_case(c: dict[str, Any], budget: str, n: int, max_tokens: int,
             run: dict[str, Any]) -> dict[str, Any]:
    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters, faults, lab
    from specdoctor.lab.drafters import offline
    from specdoctor.launch import free_port

    method = c["method"]
    k = lab.default_k(method, c["control"], c["fault"])
    if c["control"]:
        k = drafters.TRAINED_K[method] + 1  # past the designed run, so the design shows
    served = faults.serve(method, control=c["control"], fault=c["fault"], budget=budget)
    prompts = take("code", n)
    row: dict[str, Any] = {**c, "k": k, "run": {x: run[x] for x in ("id", "commit", "date")},
                           "target": served.target.name,
                           "draft": served.draft.name if served.draft else None}
    t0 = time.perf_counter()
    pred = offline.predict(method, served.target, served.draft, prompts, k, max_tokens)
    row["offline"] = {"per_position": [round(x, 4) for x in pred.per_position],
                      "mean_acceptance_length": round(pred.mean_acceptance_length, 4),
                      "drafts": pred.drafts, "accepted_per_position": pred.accepted_per_position,
                      "seconds": round(time.perf_counter() - t0, 1)}
    if c["control"]:
        row["designed"] = drafters.control(method, c["control"]).designed(k)
    port = free_port()
    plan = lab.plan(lab.LabRequest(method=method, k=k, port=port, control=c["control"],
                                   fault=c["fault"], budget=budget))
    spec = plan.spec
    row["label"] = spec.label
    row["served"] = {"target": plan.target.name, "draft": plan.draft.name if plan.draft else None,
                     "target_weights_sha256": weights_sha256(plan.target),
                     "draft_weights_sha256": weights_sha256(plan.draft)}
    t0 = time.perf_counter()
    try:
        lab.up(spec, timeout_s=1500)
        row["boot_s"] = round(time.perf_counter() - t0, 1)
        m = proto.run(spec.url, prompts, proto.MeasureParams(num_prompts=n, max_tokens=max_tokens))
        t = m.total
        row["measured"] = None if t is None else {
            "per_position": [round(x, 4) for x in t.per_position],
            "mean_acceptance_length": round(t.mean_acceptance_length, 4),
            "drafts": t.drafts, "accepted_per_position": list(t.accepted_per_position),
            "ci95": {k_: iv.to_json() for k_, iv in t.intervals.items()},
            # too few requests for an interval: the reason, never a silent blank
            "ci95_unavailable": None if t.intervals else t.intervals_unavailable,
            "output_tok_s": round(m.output_tok_s or 0.0, 2)}
        row["error"] = m.error
    except Exception as exc:  # a fault may kill the server: that is a result too
        row["measured"] = None
        row["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    finally:
        lab.down(port)
    return row


def references(budget: str, n: int, max_tokens: int, run: dict[str, Any]
               ) -> list[dict[str, Any]]:
    """Counterfactuals, offline only: what the faulty setting would reach done right.

    mtp-k-beyond-training: an MTP layer trained for 6 steps (training-time test unrolled 6
    times) served at k = 6, beside the one-step layer served at 6 (the fault). Each names its
    run and the sha256 of the weights it read, as the measured rows do."""
    from specdoctor.bench.prompts import take
    from specdoctor.lab.drafters import mtp, offline

    target = mtp.trained(budget, steps=6)
    c = offline.predict("mtp", target, None, take("code", n), 6, max_tokens)
    return [{"case": "reference:mtp-trained-for-6", "for_fault": "mtp-k-beyond-training",
             "k": 6, "target": target.name,
             "run": {x: run[x] for x in ("id", "commit", "date")},
             "target_weights_sha256": weights_sha256(target),
             "offline": {"per_position": [round(x, 4) for x in c.per_position],
                         "mean_acceptance_length": round(c.mean_acceptance_length, 4),
                         "drafts": c.drafts, "accepted_per_position": c.accepted_per_position}}]


def training_report(methods: list[str], budget: str) -> dict[str, Any]:
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import cache

    out: dict[str, Any] = {}
    for m in methods:
        target, draft = drafters.module(m).trained_pair(budget)
        for role, d in (("target", target), ("draft", draft)):
            if d is None:
                continue
            rep = cache.report(d).get("report") or {}
            if not rep:  # the lab target is trained by lab.train, which records its own file
                try:
                    rep = json.loads((d / "specdoctor-train.json").read_text())
                    rep.pop("recipe", None)
                except (OSError, ValueError):
                    rep = {}
            out[f"{m}:{role}"] = {"dir": d.name, **{k: v for k, v in rep.items()
                                                     if k in ("seconds", "train_seconds",
                                                              "final_loss_mean_last_20",
                                                              "draft_vocab_coverage")}}
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'case':34} {'k':>2} {'root cause':22} {'measured per-position':34} "
             f"{'MAL':>5}  {'offline per-position':34} {'boot s':>6}"]
    for r in rows:
        meas = r.get("measured")
        mp = " ".join(f"{x:.2f}" for x in meas["per_position"]) if meas else (r.get("error") or "")[:34]
        mal = f"{meas['mean_acceptance_length']:.2f}" if meas else "-"
        op = " ".join(f"{x:.2f}" for x in r["offline"]["per_position"])
        lines.append(f"{r['case']:34} {r['k']:>2} {r['root_cause'] or '-':22} {mp:34} {mal:>5}  "
                     f"{op:34} {r.get('boot_s', '-'):>6}")
    return "\n".join(lines)


def _pp(xs: list[float]) -> str:
    return " / ".join(f"{x:.3f}" for x in xs)


def _ppci(meas: dict[str, Any]) -> str:
    """Per-position rates, each with its 95% interval where the run recorded one (else the
    reason it has none)."""
    ci95 = meas.get("ci95") or {}
    cis = [ci95.get(f"per_position[{i}]") for i in range(len(meas["per_position"]))]
    out = " / ".join(f"{x:.3f}" + (f" [{c[0]:.2f}, {c[1]:.2f}]" if c else "")
                     for x, c in zip(meas["per_position"], cis))
    return out + (f" ({meas['ci95_unavailable']})" if meas.get("ci95_unavailable") else "")


def _mal(meas: dict[str, Any]) -> str:
    ci = (meas.get("ci95") or {}).get("mean_acceptance_length")
    return f"{meas['mean_acceptance_length']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _run(r: dict[str, Any]) -> str:
    run = r.get("run") or {}
    return str(run.get("id", "not recorded"))


def _sha(r: dict[str, Any]) -> str:
    served = r.get("served") or {}
    shas = [served.get("target_weights_sha256"), served.get("draft_weights_sha256")]
    return " ".join(x[:12] for x in shas if x) or "not recorded"


def markdown(rows: list[dict[str, Any]], refs: list[dict[str, Any]]) -> str:
    """The three tables of docs/lab.md: trained drafters, controls, faults. Every measured row
    carries its 95% intervals (bootstrap over requests), its run (commit, date) and the sha256
    of the weights the server read (target, then drafter; first 12 hex digits)."""
    healthy = {r["method"]: r for r in rows if r["case"].startswith("healthy:")}
    out = ["### Trained drafters (healthy)", "",
           "| method | k | measured per position [95% interval] | mean acceptance length "
           "[95%] | offline prediction | drafts | run | weights sha256 |",
           "|---|---|---|---|---|---|---|---|"]
    for m, r in healthy.items():
        meas = r.get("measured")
        if not meas:
            out.append(f"| {m} | {r['k']} | failed: {(r.get('error') or '')[:80]} | | | | "
                       f"{_run(r)} | |")
            continue
        out.append(f"| {m} | {r['k']} | {_ppci(meas)} | {_mal(meas)} | "
                   f"{_pp(r['offline']['per_position'])} | {meas['drafts']} | {_run(r)} | "
                   f"{_sha(r)} |")
    controls = [r for r in rows if r["control"]]
    if controls:
        out += ["", "### Controls", "",
                "| control | k | designed | measured per position | offline prediction | run |",
                "|---|---|---|---|---|---|"]
        for r in controls:
            meas = r.get("measured")
            got = _pp(meas["per_position"]) if meas else f"failed: {(r.get('error') or '')[:80]}"
            out.append(f"| {r['method']} {r['control']} | {r['k']} | {_pp(r['designed'])} | "
                       f"{got} | {_pp(r['offline']['per_position'])} | {_run(r)} |")
    out += ["", "### Faults", "",
            "| fault | root cause | k | measured per position [95% interval] | mean acceptance "
            "length [95%] (healthy) | offline prediction | run | weights sha256 |",
            "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["fault"]:
            continue
        meas, h = r.get("measured"), healthy.get(r["method"], {}).get("measured")
        got = _ppci(meas) if meas else f"failed: {(r.get('error') or '')[:80]}"
        mal = _mal(meas) if meas else "-"
        mal += f" ({h['mean_acceptance_length']:.2f})" if h else ""
        out.append(f"| `{r['fault']}` | `{r['root_cause']}` | {r['k']} | {got} | {mal} | "
                   f"{_pp(r['offline']['per_position'])} | {_run(r)} | {_sha(r)} |")
    for ref in refs:
        sha = (ref.get("target_weights_sha256") or "")[:12] or "not recorded"
        out.append(f"| {ref['case']} (offline only) | | {ref['k']} | | "
                   f"{ref['offline']['mean_acceptance_length']:.2f} | "
                   f"{_pp(ref['offline']['per_position'])} | {_run(ref)} | {sha} |")
    return "\n".join(out) + "\n"


def recorded(rows: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"_about": "written by benchmarks/drafters_faults.py; the faults are in lab/faults.py",
                           "_protocol": meta["protocol"]}
    for r in rows:
        if r["control"] or not r.get("measured"):
            continue
        out[r["case"]] = {"k": r["k"], "per_position": r["measured"]["per_position"],
                          "mean_acceptance_length": r["measured"]["mean_acceptance_length"],
                          "drafts": r["measured"]["drafts"]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="full", choices=("full", "ci"))
    ap.add_argument("--methods", default="eagle3,dflash,mtp")
    ap.add_argument("--controls", action="store_true", help="also boot every control")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--only", default=None, help="comma-separated case names to run")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite drafters_faults.md from the existing results (no server)")
    ap.add_argument("--merge", action="store_true",
                    help="keep rows of other cases from the existing results file")
    args = ap.parse_args(argv)
    # the full budget is docs/lab.md's; other budgets write beside it, never over it
    stem = "drafters_faults" + ("" if args.budget == "full" else f"_{args.budget}")
    out_json = RESULTS / f"{stem}.json"
    if args.render:
        res = json.loads(out_json.read_text())
        (RESULTS / f"{stem}.md").write_text(markdown(res["rows"], res["references"]))
        print(f"wrote {(RESULTS / f'{stem}.md').relative_to(ROOT)}", file=sys.stderr)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    methods = args.methods.split(",")
    t0 = time.perf_counter()
    from specdoctor.lab import drafters

    for m in methods:  # build (train) everything first, so boots are not slowed by training
        drafters.module(m).trained_pair(args.budget)
    todo = cases(methods, args.controls)
    if args.only:
        keep = set(args.only.split(","))
        todo = [c for c in todo if c["case"] in keep]
    run = run_info()
    print(f"run {run['id']} on {run['machine']} (load {run['load_at_start']})", file=sys.stderr)
    rows = []
    for c in todo:
        print(f"== {c['case']}", file=sys.stderr, flush=True)
        rows.append(run_case(c, args.budget, args.n, args.max_tokens, run))
        print(json.dumps({k: rows[-1].get(k) for k in ("case", "k", "measured", "error")}),
              file=sys.stderr, flush=True)
    import torch
    import vllm

    run.update({"cases": [r["case"] for r in rows], "vllm": vllm.__version__,
                "torch": torch.__version__, "wall_s": round(time.perf_counter() - t0, 1),
                "load_at_end": round(os.getloadavg()[0], 1),
                "training": training_report(methods, args.budget)})
    meta = {"protocol": {"suite": "code", "num_prompts": args.n, "max_tokens": args.max_tokens,
                         "temperature": 0.0, "budget": args.budget,
                         "per_position": "unconditional (accepted at j / drafts)",
                         "mean_acceptance_length": "counts the bonus token"},
            "runs": {run["id"]: run}}
    refs = ([] if args.only or "mtp" not in methods
            else references(args.budget, args.n, args.max_tokens, run))
    if args.merge and out_json.is_file():
        old = json.loads(out_json.read_text())
        if old["meta"]["protocol"] != meta["protocol"]:
            print("refusing --merge: the existing results used another protocol "
                  f"({old['meta']['protocol']})", file=sys.stderr)
            return 2
        done = {r["case"] for r in rows}
        kept = [r for r in old["rows"] if r["case"] not in done]
        rows = kept + rows
        rows.sort(key=lambda r: [c["case"] for c in cases(["eagle3", "dflash", "mtp"], True)]
                  .index(r["case"]))
        refs = refs or old.get("references", [])
        meta["runs"] = {**old["meta"].get("runs", {}), **meta["runs"]}
        print(f"--merge: {len(kept)} rows kept from earlier runs "
              f"({', '.join(sorted({r['run']['id'] for r in kept}))}); each row names its run",
              file=sys.stderr)
    text = table(rows)
    for r in refs:
        op = " ".join(f"{x:.2f}" for x in r["offline"]["per_position"])
        text += (f"\n{r['case']:34} {r['k']:>2} {'(offline only)':22} {'':34} "
                 f"{r['offline']['mean_acceptance_length']:>5.2f}  {op}")
    print(text)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out_json.write_text(
            json.dumps({"meta": meta, "rows": rows, "references": refs}, indent=2) + "\n")
        runs = "\n".join(
            f"run {i}: commit {r['commit']}, {r['date']}, {r['machine']} (torch "
            f"{r.get('torch')}, {r.get('torch_cpu_capability')}, vLLM {r.get('vllm')}), load "
            f"{r.get('load_at_start')}: {', '.join(r.get('cases', []))}"
            for i, r in meta["runs"].items())
        (RESULTS / f"{stem}.txt").write_text(
            f"{__doc__.splitlines()[0]}\n{args.n} code prompts x {args.max_tokens} tokens, "
            f"greedy\n{runs}\n\n{text}\n\ntraining: "
            f"{json.dumps({i: r.get('training') for i, r in meta['runs'].items()}, indent=1)}\n")
        (RESULTS / f"{stem}.md").write_text(markdown(rows, refs))
        wrote = [out_json]
        if args.budget == "full" and (not args.only or args.merge):
            RECORDED.write_text(json.dumps(recorded(rows, meta), indent=2) + "\n")
            wrote.append(RECORDED)
        print(f"wrote {' and '.join(str(w.relative_to(ROOT)) for w in wrote)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
