"""A gate from start to end: resolve the baseline, measure the candidate over the baseline's
cells, compare, and (on request) diagnose a candidate that failed.

The candidate is measured with the benchmark runner (``bench.runner``), so its run is recorded
in the store like any ``bench`` run (kind ``gate``; ``specdoctor report RUN_ID`` shows it) and
a server the gate launches is started, waited for and stopped there. ``candidate_configs`` is
the one place that says which servers a gate measures.

Exit codes: 0 no significant regression; 1 a significant regression beyond the allowed drop;
2 bad input (also: a candidate serving another k than the baseline); 3 the candidate could not
be measured (unreachable, failed to start, died, cells that did not run).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specdoctor.bench import runner, summary
from specdoctor.bench.matrix import MatrixParams
from specdoctor.errors import InputError, TargetError
from specdoctor.gate import baseline as bl
from specdoctor.gate.compare import ALPHA, MAX_DROP, CellSample, Comparison, compare
from specdoctor.launch.spec import LaunchSpec
from specdoctor.store.baselines import open_baseline_store
from specdoctor.store.bench import open_bench_store

PASS, FAIL, BAD_INPUT, UNREACHABLE = 0, 1, 2, 3


@dataclass(frozen=True)
class Candidate:
    """The server under test: a running one (``url``) or one the gate launches (``spec``).
    ``flags``: how the user named it on the command line, for the commands the gate prints."""

    flags: str
    url: str | None = None
    spec: LaunchSpec | None = None

    @property
    def describe(self) -> str:
        return self.url or (self.spec.shell_command() if self.spec else "?")


@dataclass(frozen=True)
class GateOptions:
    suites: tuple[str, ...] = ()  # empty: every one of the baseline's
    sampling: tuple[str, ...] = ()
    concurrency: tuple[int, ...] = ()
    seed: int | None = None  # None: the baseline's seeds (sampled cells replay its streams)
    model: str | None = None
    alpha: float = ALPHA
    max_drop: float = MAX_DROP
    request_timeout_s: float | None = None  # None: the baseline's
    ready_timeout_s: float = runner.READY_TIMEOUT_S  # the bench runner starts the servers
    diagnose: bool = False
    db: Path | None = None


@dataclass
class GateResult:
    baseline: bl.Baseline
    baseline_ref: str
    candidate: Candidate
    run_id: int
    params: MatrixParams
    comparison: Comparison
    exit_code: int
    failed_cells: dict[str, str] = field(default_factory=dict)  # cell -> why it has no figures
    notes: list[str] = field(default_factory=list)
    reproduce: dict[str, str] = field(default_factory=dict)  # regressed cell -> command
    load: dict[str, float] = field(default_factory=dict)
    diagnosis: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code,
                "status": {PASS: "pass", FAIL: "fail", BAD_INPUT: "bad input",
                           UNREACHABLE: "unmeasured"}[self.exit_code],
                "baseline": {"ref": self.baseline_ref, "name": self.baseline.name,
                             "source": self.baseline.source, "target": self.baseline.target},
                "candidate": {"target": self.candidate.describe, "run_id": self.run_id,
                              "flags": self.candidate.flags},
                "cells": [c.name for c in self.params.cells()],
                "matrix": self.params.to_json(), "failed_cells": self.failed_cells,
                "comparison": self.comparison.to_json(), "reproduce": self.reproduce,
                "notes": self.notes, "load": self.load, "diagnosis": self.diagnosis}


# ---- baselines ---------------------------------------------------------------------------

def resolve_baseline(ref: str, db: Path | None) -> bl.Baseline:
    """RUN_ID (a bench run), FILE (an exported baseline) or NAME (a saved one)."""
    if ref.isdigit():
        return baseline_from_run(int(ref), db)
    path = Path(ref)
    if path.is_file():
        return bl.load_file(path)
    if path.suffix == ".json" or os.sep in ref:
        raise InputError(f"no baseline file {ref}",
                         "check the path, or export one: specdoctor gate --export NAME FILE")
    store = open_baseline_store(db)
    try:
        saved = store.get(ref)
    finally:
        store.close()
    return bl.from_json(saved.doc, f"baseline {ref!r}")


def baseline_from_run(run_id: int | None, db: Path | None, config: str | None = None,
                      name: str | None = None) -> bl.Baseline:
    """The baseline of bench run ``run_id`` (None: the latest bench run)."""
    store = open_bench_store(db)
    try:
        if run_id is None:
            runs = [r for r in store.runs(50) if r.kind == "bench"]
            if not runs:
                raise InputError(f"no bench run in {store.path} to save",
                                 "measure one first: specdoctor bench --url URL")
            run_id = runs[0].id
        run = store.run(run_id)
        cells = store.cells(run_id)
        rows = summary.rows(cells, run.configs)
    finally:
        store.close()
    params = MatrixParams.from_json(run.params["matrix"])
    return bl.from_run(rows, run.id, run.kind, run.created_at, params, run.configs, config, name,
                       bl.request_keys(cells, params))


def save(name: str, run_id: int | None, db: Path | None, config: str | None = None
         ) -> bl.Baseline:
    """Store bench run ``run_id`` (None: the latest) as the named baseline ``name``."""
    if not name or name.isdigit() or os.sep in name or name.endswith(".json"):
        raise InputError(f"{name!r} cannot name a baseline (it would read as a run id or a file)",
                         "use letters, e.g. --save prod-eagle3")
    b = baseline_from_run(run_id, db, config, name)
    store = open_baseline_store(db)
    try:
        store.save(name, b.to_json())
    finally:
        store.close()
    return b


def export(name: str, path: Path, db: Path | None) -> bl.Baseline:
    b = resolve_baseline(name, db)
    bl.write_file(replace(b, name=b.name or name), path)
    return b


# ---- the gate ----------------------------------------------------------------------------

def plan_params(b: bl.Baseline, opts: GateOptions) -> MatrixParams:
    """The baseline's matrix, restricted to the cells asked for (each must be the baseline's)."""
    p = b.matrix
    picked = {}
    for key, asked, have in (("suites", opts.suites, p.suites),
                             ("sampling", opts.sampling, p.sampling),
                             ("concurrency", opts.concurrency, p.concurrency)):
        extra = [x for x in asked if x not in have]
        if extra:
            flag = {"suites": "--suite", "sampling": "--sampling", "concurrency": "-c"}[key]
            raise InputError(f"the baseline has no {key} {', '.join(map(str, extra))}",
                             f"its cells use {flag} {','.join(map(str, have))}")
        picked[key] = tuple(x for x in have if x in asked) if asked else have
    p = replace(p, **picked, model=opts.model,
                seed=p.seed if opts.seed is None else opts.seed,
                timeout_s=p.timeout_s if opts.request_timeout_s is None else opts.request_timeout_s)
    names = {c.sample.cell for c in b.cells}
    if not any(c.name in names for c in p.cells()):
        raise InputError("none of the cells asked for was measured in the baseline",
                         f"the baseline's cells: {', '.join(sorted(names))}")
    return p


def candidate_configs(c: Candidate, with_spec_off: bool) -> list[runner.Config]:
    """The servers a gate measures: the candidate, and its spec-off twin when the baseline has
    a speed reference and the gate launches the server itself."""
    if c.spec is None:
        return [runner.Config(label=c.url or "candidate", url=c.url)]
    configs = [runner.Config(label=c.spec.label or "candidate", spec=c.spec)]
    if with_spec_off:
        off = c.spec.without_speculation()
        configs.insert(0, runner.Config(label=off.label, role="baseline", spec=off))
    return configs


def check_k(b: bl.Baseline, c: Candidate) -> None:
    """A launched candidate must serve the baseline's k (the figures are per position)."""
    ks = {s.sample.k for s in b.cells if s.sample.k is not None}
    k = c.spec.k if c.spec is not None and c.spec.engine != "unknown" else None
    if k is not None and ks and k not in ks:
        raise InputError(f"the candidate serves k={k}, the baseline k={','.join(map(str, ks))}",
                         "a gate compares one configuration: serve the baseline's k, or "
                         "measure and save a new baseline")


def gate(ref: str, candidate: Candidate, opts: GateOptions,
         events: Callable[[int, runner.Plan], runner.Events] | None = None,
         progress: Callable[[str], None] = lambda m: None) -> GateResult:
    """Measure the candidate over the baseline's cells and compare. Raises InputError (exit 2)
    and TargetError (exit 3) before anything is measured; afterwards the result carries the
    exit code and keeps whatever was measured."""
    b = resolve_baseline(ref, opts.db)
    params = plan_params(b, opts)
    bl.check_prompts(b, params)
    check_k(b, candidate)
    if candidate.url is not None:
        from specdoctor.launch import http_ok

        if not http_ok(candidate.url.rstrip("/") + "/v1/models", 10.0):
            raise TargetError(f"cannot reach {candidate.url} (GET /v1/models did not answer 200)",
                              "is the server up and is this its base URL (http://HOST:PORT)?")
    load = {"before": round(os.getloadavg()[0], 2)}
    plan = runner.Plan("gate", params, candidate_configs(candidate, b.has_spec_off),
                       ready_timeout_s=opts.ready_timeout_s)
    store = open_bench_store(opts.db)
    try:
        run_id = runner.start_run(store, plan)
        ev = events(run_id, plan) if events else None
        try:
            runner.execute(store, run_id, plan, ev)
        finally:
            close = getattr(ev, "close", None)
            if close is not None:
                close()
        run = store.run(run_id)
        cells = store.cells(run_id)
        rows = summary.rows(cells, run.configs)
    finally:
        store.close()
    load["after"] = round(os.getloadavg()[0], 2)
    res = _judge(b, ref, candidate, run_id, params, rows, plan, opts,
                 bl.request_keys(cells, params))
    res.load = load
    if res.exit_code == FAIL and opts.diagnose:
        progress("the gate failed: diagnosing the candidate")
        res.diagnosis = diagnose_candidate(candidate, opts.db)
    return res


def _speedups_reported(base: list[Any], cand: list[Any], measured_at: object) -> str:
    """The note on a URL candidate's speedups: each cell's over the baseline's spec-off, not
    gated, and why."""
    from specdoctor.gate.compare import speedup_estimate

    off = {s.cell: s.spec_off_tok_s for s in base}
    was = {s.cell: speedup_estimate(s.tok_s, s.spec_off_tok_s) for s in base}
    each = []
    for s in cand:
        now = speedup_estimate(s.tok_s, off.get(s.cell))
        before = was.get(s.cell)
        if now is not None and before is not None:
            each.append(f"{s.cell} {now.value:.2f}x (baseline {before.value:.2f}x)")
    return ("speedup over spec-off reported, not gated: the gate cannot restart a server it "
            "only has the URL of, so the candidate's tok/s is over the baseline's own spec-off "
            f"(measured {measured_at}), and tok/s between sessions moves far more than one "
            "session's interval (gate with --launch to gate the speedup)"
            + (": " + "; ".join(each) if each else ""))


def _judge(b: bl.Baseline, ref: str, candidate: Candidate, run_id: int, params: MatrixParams,
           rows: list[summary.Row], plan: runner.Plan, opts: GateOptions,
           keyed: bl.KeyedUnits | None = None) -> GateResult:
    spec_label = plan.configs[-1].label
    wanted = {c.name for c in params.cells()}
    base = [s for s in b.samples() if s.cell in wanted]
    notes: list[str] = []
    cand = [s for _, s in bl.cell_samples(rows, spec_label, keyed)]
    # A URL candidate has no spec-off of its own: its speedup would be over the baseline's
    # spec-off, from another session, and tok/s between sessions moves far more than one
    # session's interval says (benchmarks/gate_paired.py: 58% of such self-tests at p <= 0.05,
    # nominal 5%). It is reported, not gated.
    speed = candidate.spec is not None
    if b.has_spec_off and not speed:
        notes.append(_speedups_reported(base, cand, b.source.get("measured_at")))
    failed = {r.cell: "; ".join(r.errors) or r.status for r in rows
              if r.cell in wanted and r.status == "failed"}
    cmp = compare(base, cand, alpha=opts.alpha, max_drop=opts.max_drop, speed=speed,
                  sensitivity=True)
    for name in sorted(wanted - {s.cell for s in b.samples()}):
        notes.append(f"{name} is not in the baseline (it failed there): not compared")
    unmeasured = sorted({t.cell for t in cmp.tests if t.lacking == "candidate"})
    if unmeasured:
        notes.append("the candidate gave no acceptance figure or no interval in "
                     f"{', '.join(unmeasured)}: is speculation on, with per-request metrics "
                     "(vLLM: --per-request-spec-decode-metrics summary)?")
    if cmp.mismatches:
        notes.append("the candidate serves another k than the baseline: "
                     + "; ".join(cmp.mismatches))
    if cmp.regressions:
        code = FAIL
    elif cmp.mismatches:
        code = BAD_INPUT
    elif cmp.missing or failed or unmeasured:
        code = UNREACHABLE
    elif not cmp.tested:
        code = BAD_INPUT
        notes.append("nothing could be tested: the baseline has no 95% interval in any cell "
                     "(measure it with at least 15 requests per cell and per-request metrics)")
    else:
        code = PASS
    res = GateResult(b, ref, candidate, run_id, params, cmp, code, failed, notes)
    res.reproduce = {t.cell: reproduce_command(ref, candidate, t.cell, params, opts)
                     for t in cmp.regressions}
    return res


def reproduce_command(ref: str, candidate: Candidate, cell: str, params: MatrixParams,
                      opts: GateOptions) -> str:
    """The gate of this one cell, as the user types it."""
    c = next(x for x in params.cells() if x.name == cell)
    words = ["specdoctor", "gate", "--baseline", shlex.quote(ref), candidate.flags,
             "--suite", shlex.quote(c.suite), "--sampling", c.sampling, "-c", str(c.concurrency)]
    if opts.seed is not None:
        words += ["--seed", str(opts.seed)]
    if opts.db is not None:
        words += ["--db", shlex.quote(str(opts.db))]
    return " ".join(words)


# ---- diagnosis ---------------------------------------------------------------------------

def diagnose_candidate(candidate: Candidate, db: Path | None, timeout_s: float = 3600.0
                       ) -> dict[str, Any]:
    """``specdoctor diagnose`` on the candidate, through its command line (its public entry):
    ``--url`` for a running server, ``--launch`` (with ``--env``) for one the gate launched.
    Returns its JSON (root cause, signature, report), or ``{"error": …}``."""
    args = [sys.executable, "-m", "specdoctor", "diagnose", "--json"]
    if candidate.spec is not None:
        args += ["--launch", shlex.join(candidate.spec.argv)]
        for key, value in sorted(candidate.spec.env.items()):
            args += ["--env", f"{key}={value}"]
    else:
        args += ["--url", str(candidate.url)]
    if db is not None:
        args += ["--db", str(db)]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"diagnose did not finish within {timeout_s:.0f} s"}
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        return {"error": f"diagnose exited {proc.returncode}: {tail}"}
    try:
        return dict(json.loads(proc.stdout))
    except ValueError:
        return {"error": "diagnose printed no JSON: " + proc.stdout[-300:]}
