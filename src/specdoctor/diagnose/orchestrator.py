"""``diagnose``: measure, classify, build the ledger, run experiments cheapest first, report.

Targets: a launch command (specdoctor owns the server's life and changes one thing per
experiment), a URL (measure and classify; no restart), or log files (signature and the static
experiments). The CLI turns "no target" into the lab's launch command; nothing here knows the
lab.

The investigation is written to the store when it starts and after every experiment, so a run
that dies keeps what it found. An experiment that crashes is recorded inconclusive with the
reason, and the diagnosis goes on.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specdoctor.bench.prompts import take
from specdoctor.diagnose import catalogue as catalogue_mod
from specdoctor.diagnose import references
from specdoctor.diagnose.ledger import Ledger, build
from specdoctor.diagnose.signature import Facts, Signature, classify
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context, Launcher
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.logs_scan import error_lines
from specdoctor.experiments.oracle_gap import OracleGreedy, OracleSampled, expected_profile
from specdoctor.experiments.repeat import fall as repeat_fall
from specdoctor.launch import LaunchSpec, Servers, free_port
from specdoctor.launch.servers import READY_TIMEOUT_S

OFFICIAL = (1.0, 0.95)   # the official sampling of CASES.md's sweeps
# Experiments that may run before the signature (their results are in the ledger already).
RUN_EARLY = ("oracle-greedy", "oracle-sampled", "spec-off-baseline")


@dataclass(frozen=True)
class Target:
    launch: LaunchSpec | None = None
    url: str | None = None
    logs: tuple[Path, ...] = ()

    def describe(self) -> str:
        if self.launch is not None:
            return self.launch.shell_command()
        if self.url is not None:
            return self.url
        return " ".join(map(str, self.logs))


@dataclass
class Options:
    greedy: bool = True
    sampled: tuple[float, float] | None = OFFICIAL
    suites: tuple[str, ...] = ("code", "essay")
    prompts_per_suite: int = 8
    max_tokens: int = 64
    budget_min: float = 10.0
    restart_min: float = 2.0
    reference_file: Path | None = None
    concurrency8: bool = True
    # Compare tok/s with speculation off when acceptance looks healthy (one more server start)
    spec_off: bool = True
    workdir: Path = Path(".")
    # The speculative method and k as the user states them, for targets that do not say
    # (a log excerpt without its start-up lines, a URL): they pick the published reference.
    method: str | None = None
    k: int | None = None
    # Seconds each server the diagnosis starts (baseline, spec-off, relaunches) may take to
    # become ready; then it is stopped and its log tail shown.
    ready_timeout_s: float = READY_TIMEOUT_S
    # A server that cannot be restarted: its model directories as the user gives them (else
    # what /v1/models and the start-up log tell: diagnose.served), and the logs' engine.
    target_dir: Path | None = None
    draft_dir: Path | None = None
    tokenizer_dir: Path | None = None
    engine: str | None = None


@dataclass
class Diagnosis:
    signature: Signature
    ledger: Ledger
    root_cause: str | None
    other_causes: list[str]
    report: Path | None = None
    investigation: int | None = None
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    # No cause named although the symptom needs one: the candidates that remain and why
    # ({"candidates": [...], "why": "..."}; empty when a cause is named or nothing is wrong).
    undetermined: dict[str, Any] = field(
        default_factory=lambda: {"candidates": [], "why": ""})
    served: dict[str, Any] | None = None   # diagnose.served's setup, for a URL or logs target
    # rule cause-sized: confirmed causes that explain too little to be the answer, with why,
    # and what each sized cause (root, others, also found) accounts for
    also_found: list[tuple[str, str]] = field(default_factory=list)
    explains: dict[str, Any] = field(default_factory=dict)

    @property
    def root_cause_basis(self) -> str | None:
        """How the root cause was reached: its deciding finding's basis."""
        e = self.ledger.entry(self.root_cause) if self.root_cause else None
        return None if e is None else e.basis

    def to_json(self) -> dict[str, Any]:
        return {"signature": {"class": self.signature.cls,
                              "evidence": self.signature.evidence},
                "ledger": [{"id": e.hypothesis, "cost": e.cost.to_json(),
                            "verdict": e.verdict.value, "evidence": e.evidence,
                            "experiment": e.experiment, "basis": e.basis}
                           for e in self.ledger.entries],
                "root_cause": self.root_cause, "root_cause_basis": self.root_cause_basis,
                "undetermined": {"candidates": list(self.undetermined.get("candidates", [])),
                                 "why": self.undetermined.get("why", "")},
                "other_causes": self.other_causes,
                "root_cause_explains": (self.explains.get(self.root_cause)
                                        if self.root_cause else None),
                "other_causes_explain": {h: self.explains.get(h) for h in self.other_causes},
                "also_found": [{"cause": h, "why": why, "explains": self.explains.get(h)}
                               for h, why in self.also_found],
                "report": None if self.report is None else str(self.report),
                "investigation": self.investigation, "notes": self.notes,
                "wall_s": round(self.wall_s, 1), "signature_detail": self.signature.to_json(),
                "served": self.served,
                "experiments": [r.to_json() for r in self.ledger.results]}


class Saver:
    """Writes the investigation after every step (``None`` store: nothing is written)."""

    def __init__(self, store: Any, target: Target) -> None:
        self.store = store
        self.id = store.start(target.describe()) if store is not None else None

    def save(self, sig: Signature | None, ledger: Ledger | None, status: str = "running",
             result: dict[str, Any] | None = None) -> None:
        if self.store is None or self.id is None:
            return
        self.store.save(self.id, signature=sig.to_json() if sig else None,
                        ledger=ledger.to_json() if ledger else [],
                        experiments=[r.to_json() for r in (ledger.results if ledger else [])],
                        status=status, result=result)


class DiagnosisFailed(SpecdoctorError):
    """The diagnosis itself broke; what it had found is saved, its servers are stopped."""

    exit_code = 5


@dataclass
class _Partial:
    """What the investigation has so far: saved as it is when a step breaks."""

    sig: Signature | None = None
    ledger: Ledger | None = None
    facts: Facts | None = None
    step: str = "starting"
    served: dict[str, Any] | None = None


def diagnose(target: Target, opts: Options, launcher: Launcher | None = None,
             store: Any = None, progress: Callable[[str], None] = lambda m: None) -> Diagnosis:
    """Measure, classify, run the ledger's experiments, report.

    A launch target is started through ``launcher`` (default: ``specdoctor.launch.Servers``,
    whose servers die with this process). A URL given alone that does not answer raises
    ``TargetError`` before anything starts. Every server started on the way is stopped before
    this returns or raises. A crashing
    experiment is inconclusive and the diagnosis goes on; a report that cannot be written is a
    note; any other break saves the partial investigation (status ``failed``) and raises
    ``DiagnosisFailed`` naming it and the traceback."""
    t0 = time.monotonic()
    if target.url is not None and not target.logs and target.launch is None:
        _reachable(target.url)
    opts.workdir.mkdir(parents=True, exist_ok=True)
    saver = Saver(store, target)
    servers = launcher if launcher is not None else (
        Servers(opts.ready_timeout_s) if target.launch is not None else None)
    ctx = _context(target, opts, servers, progress)
    notes: list[str] = []
    part = _Partial()
    try:
        _investigate(ctx, target, opts, saver, notes, part)
        assert part.sig is not None and part.ledger is not None and part.facts is not None
        part.step = "deciding the root cause"
        _gaps(ctx, part.ledger)
        answer = part.ledger.answer()
        root, others = answer.root, answer.others
        sig = _against_recovery(part.sig, part.facts, part.ledger, root, notes)
    except BaseException as exc:
        where = _keep_traceback(ctx, "diagnose")
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        saver.save(part.sig, part.ledger, "failed",
                   {"error": f"stopped while {part.step}: {why}", "notes": notes,
                    "traceback": None if where is None else str(where)})
        if not isinstance(exc, Exception):
            raise   # Ctrl-C, SIGTERM: saved, servers stopped below, then leave
        kept = (f"the partial investigation is saved (specdoctor ledger show {saver.id})"
                if saver.id is not None else "nothing was stored (no store)")
        raise DiagnosisFailed(
            f"the diagnosis broke while {part.step}: {why}",
            kept + (f"; server logs and the traceback are in {where.parent}; please report it "
                    f"with {where.name}" if where is not None else "")) from exc
    finally:
        if servers is not None:
            servers.stop_all()
    d = Diagnosis(sig, part.ledger, root, others, investigation=saver.id, notes=notes,
                  wall_s=time.monotonic() - t0, undetermined=answer.undetermined,
                  also_found=list(answer.also), explains=dict(answer.explains),
                  served=part.served)
    d.report = _write_report(ctx, d, opts.workdir, target.describe(), notes)
    saver.save(sig, part.ledger, "done", d.to_json())
    return d


def _reachable(url: str) -> None:
    """A URL that is the whole target must answer before anything is measured or stored:
    ``TargetError`` (exit status 3) naming the URL and the fix otherwise. With the server's logs
    beside it the logs are still diagnosed, and the notes say what the URL answered."""
    from specdoctor.bench.measure import served_models

    served_models(url)


def _investigate(ctx: Context, target: Target, opts: Options, saver: Saver, notes: list[str],
                 part: _Partial) -> None:
    """Everything up to the ledger's verdicts; fills ``part`` as it goes."""
    if target.launch is not None:
        part.step = "starting the server"
        _start(ctx, target.launch, notes)
    if target.logs:
        # before measuring: a live server's log then holds its own traffic only, not the
        # requests this diagnosis sends (greedy, then sampled: they would read as drift)
        part.step = "reading the logs"
        _read_logs(ctx, target.logs, opts, notes)
    if ctx.url is not None:
        part.step = "measuring"
        _measure(ctx, opts, notes)
        for p in target.logs:   # what the server logged while measured (errors) is read too
            ctx.server_logs[str(p)] = common.read_text(p)
    if ctx.baseline_server is not None:
        ctx.server_logs["baseline"] = common.read_text(
            ctx.baseline_server.log_path)
    if target.launch is None:
        part.step = "reading what the server tells of its setup"
        part.served = _served_setup(ctx, target, opts, notes)
    _user_setup(ctx, opts, notes)
    _k_from_measurement(ctx, notes)
    part.step = "computing the oracle"
    _as_served_vocabulary(ctx, notes)
    oracle_result = _oracle_first(ctx, notes)
    sampled_result = _sampled_oracle_first(ctx, notes) if oracle_result is not None else None
    part.step = "classifying the symptom"
    part.facts = facts = _facts(ctx, opts, oracle_result)
    part.sig = sig = classify(facts)
    if sig.cls == "unreferenced":
        notes.append(no_reference(ctx.method, ctx.k, references.served_of(ctx)))
    cat = catalogue_mod.load()
    part.ledger = ledger = build(sig, cat, opts.restart_min,
                                 also=kept_candidates(ctx, facts) + weak_lookup(sig, facts))
    for early in (oracle_result, sampled_result):
        if early is not None:
            ledger.apply(early)
    _gaps(ctx, ledger)
    saver.save(sig, ledger)
    part.step = "running the experiments"
    t_plan = time.monotonic()
    if not ledger.entries:
        ctx.progress(f"{sig.cls}: no candidate to test")
    else:
        _run_plan(ctx, ledger, cat, opts, t_plan, ctx.baseline_server, saver)
    _redecide_draft_quality(ctx, ledger)
    _speed_last(ctx, opts, cat, saver, notes, part, t_plan)
    _restate_drafting(ctx, ledger)
    if "crash" in sig.classes or not ctx.measured and ctx.log_total is None:
        part.step = "running the static experiments beside the crash"
        _static_whatever(ctx, ledger, cat, notes)
        saver.save(sig, ledger)


# Experiments that need no server: beside a crash (or a server that never measured) they still
# run, each asked about every hypothesis it settles, so what the files and the launch's own
# flags show is reported beside the crash (docs/diagnose.md, "A server that cannot start").
STATIC_KINDS = ("static",)
STATIC_ALSO = ("vocab-map-check",)


def _static_whatever(ctx: Context, ledger: Ledger, cat: Any, notes: list[str]) -> None:
    """Every static experiment not run yet, on the launch's own layout and files, whatever the
    server did. Their findings join the ledger where it holds the hypothesis; every result is
    kept in the ledger's experiments (the report's Experiments section) and summed up in a note,
    so a lead (Case B's dropped decode_context_parallel_size) is reported beside the crash
    without becoming the crash's cause."""
    ran = {r.experiment for r in ledger.results}
    for spec in cat.experiments.values():
        if spec.id in ran or not (spec.kind in STATIC_KINDS or spec.id in STATIC_ALSO):
            continue
        exp = catalogue_mod.experiment(spec)
        if exp is None:
            continue
        why = exp.unavailable(ctx)
        if why is not None:
            notes.append(f"beside the crash: {spec.id} not run ({why})")
            continue
        ctx.progress(f"static experiment {spec.id} (whatever the server did)")
        try:
            result = exp.run(ctx, spec.settles)
        except Exception as exc:  # noqa: BLE001 - a crashing experiment must not end the diagnosis
            _keep_traceback(ctx, spec.id)
            result = ExperimentResult(spec.id, [], error=f"{type(exc).__name__}: {exc}")
        ledger.apply(result)
        said = [f"{f.hypothesis} {f.verdict.value}: {f.evidence}" for f in result.findings
                if f.verdict is not Verdict.EXCLUDED]
        notes.append(f"beside the crash: {spec.id}: "
                     + ("; ".join(said) if said else "nothing found")
                     + (f" (error: {result.error})" if result.error else ""))


def _speed_last(ctx: Context, opts: Options, cat: Any, saver: Saver, notes: list[str],
                part: _Partial, t_plan: float) -> None:
    """Speed is the open question once acceptance looks healthy and no experiment found a
    cause: measure spec-off, restate the signature, and test what the new classes add.

    Not before the plan: acceptance that looks healthy against an oracle sharing the files'
    error is decided by the file-side counterfactuals first (a drafter whose wrong config also
    makes it slow must not stop the plan on draft-overhead)."""
    ledger, sig = part.ledger, part.sig
    assert ledger is not None and sig is not None and part.facts is not None
    if ledger.root_cause()[0] is not None or not _speed_check_wanted(ctx, opts, sig):
        return
    if time.monotonic() + opts.restart_min * 60 > t_plan + opts.budget_min * 60:
        notes.append("speed with speculation off: not measured (over the budget)")
        return
    part.step = "measuring with speculation off"
    method_ref = method_reference(ctx.method, ctx.k, opts.reference_file,
                                  references.served_of(ctx))
    if method_ref is not None:
        ctx.method_reference = (method_ref.words(), method_ref.accepted_per_draft)
    result = _spec_off_first(ctx, notes)
    if result is None:
        return
    if ctx.tok_s_spec_off is not None:
        part.facts = facts = replace(part.facts, tok_s=ctx.tok_s_spec_on,
                                     tok_s_spec_off=ctx.tok_s_spec_off)
        part.sig = sig = classify(facts)
    added = ledger.extend(build(sig, cat, opts.restart_min).entries, opts.restart_min)
    ledger.signature = sig
    ledger.apply(result)
    split = result.numbers.get("split") or {}
    if split.get("lost") == "acceptance" and method_ref is not None:
        added += _acceptance_lost(ctx, ledger, cat, opts, part.facts, method_ref, notes)
    saver.save(sig, ledger)
    if added:
        part.step = "running the experiments the speed adds"
        _run_plan(ctx, ledger, cat, opts, t_plan, None, saver, only=added)
    _redecide_draft_quality(ctx, ledger)


def method_reference(method: str | None, k: int | None, user_file: Path | None,
                     served: references.Served | None = None) -> references.Reference | None:
    """What the method reaches at this k, to split slower-than-spec-off by: the published
    figure and the user's reference (at this k: cut to its first k positions when it states
    more per-position rates; a mean-only one only at its own k), the higher of the two — the
    acceptance a healthy drafter of this method is known to reach. Not the oracle: it runs these
    weights, so it shares whatever made them weak."""
    if k is None:
        return None
    refs = [r for r in (references.published_for(method, k, served),) if r is not None]
    if user_file is not None:
        user = references.load_user_reference(user_file)
        if user.k == k or (user.shape_stated and user.k > k):
            refs.append(replace(user, per_position=user.per_position[:k]))
    return max(refs, key=lambda r: r.accepted_per_draft) if refs else None


def _acceptance_lost(ctx: Context, ledger: Ledger, cat: Any, opts: Options, facts: Facts,
                     ref: references.Reference, notes: list[str]) -> tuple[str, ...]:
    """Slower than spec-off because the acceptance lost (rule slower-split): the acceptance is
    now the question. The measurement is stated against what the method reaches, the candidates
    that explain that shape join the ledger, and the greedy oracle's verdict is restated with the
    oracle called low (it is below what the method reaches): draft-quality waits for its
    rivals, the engine-side causes stay excluded. Returns the candidates added."""
    against = classify(replace(facts, reference=ref, tok_s=None, tok_s_spec_off=None))
    notes.append(f"acceptance against {ref.words()}: {against.cls} ({against.evidence})")
    if against.cls in ("healthy", "unreferenced", "no-data", "undetermined"):
        return ()
    added = ledger.extend(build(against, cat, opts.restart_min,
                                also=kept_candidates(ctx, facts)).entries, opts.restart_min)
    if ctx.oracle_gap is not None:
        ctx.oracle_below_method = True
        ledger.apply(ExperimentResult("rule:oracle-equal-low", rules.decide_oracle(
            ctx.oracle_gap, ctx.oracle_pos0, file_side_excluded=False, reference_low=True,
            trained=rules.trained_drafter(ctx.method))))
    return added


def _write_report(ctx: Context, d: Diagnosis, workdir: Path, target: str,
                  notes: list[str]) -> Path | None:
    """The report files, or None with a note: a report that breaks loses no verdict."""
    try:
        from specdoctor.diagnose.report import write_report

        return write_report(d, workdir, target)
    except Exception as exc:  # noqa: BLE001 - the diagnosis is saved and printed all the same
        where = _keep_traceback(ctx, "report")
        notes.append(f"the report could not be written: {type(exc).__name__}: {exc}"
                     + (f" (traceback: {where})" if where is not None else ""))
        return None


# -- steps ---------------------------------------------------------------------------------------

def _context(target: Target, opts: Options, launcher: Launcher | None,
             progress: Callable[[str], None]) -> Context:
    prompts: list[str] = []
    for s in opts.suites:
        prompts += take(s, opts.prompts_per_suite)
    ctx = Context(workdir=opts.workdir, url=target.url, launch=target.launch, launcher=launcher,
                  logs=target.logs, prompts=tuple(prompts), max_tokens=opts.max_tokens,
                  sampling=opts.sampled, progress=progress)
    if target.launch is not None:
        s = common.settings(target.launch)
        ctx.settings = s
        ctx.method, ctx.k = s.method, s.k
        ctx.target_dir, ctx.draft_dir, ctx.tokenizer_dir = s.target, s.draft, s.tokenizer
    ctx.suite = ",".join(opts.suites)
    return ctx


def no_reference(method: str | None, k: int | None = None,
                 served: references.Served | None = None) -> str:
    """What to give so that a symptom can be called low (pure)."""
    why = references.why_no_published(method, k, served)
    first = ("pass --method (and --k) to compare with the published figures for that drafter, "
             if method is None else
             f"{why}: pass --k to compare with the published figures at that k, "
             if k is None and why else f"{why}: " if why else "")
    return ("no reference to compare with, so nothing can be called low: " + first
            + "--reference FILE with your own, or the served model's directories (diagnose --url "
              "with --target DIR --draft DIR, or with the server's start-up log in --logs) or "
              "diagnose --launch '<the server command>' so that the oracle computes what these "
              "weights allow")


def _user_setup(ctx: Context, opts: Options, notes: list[str]) -> None:
    """--method/--k where the target does not say (a stated value wins, with a note when the
    target said otherwise)."""
    for attr, given in (("method", opts.method), ("k", opts.k)):
        if given is None:
            continue
        found = getattr(ctx, attr)
        if found is not None and found != given:
            notes.append(f"the target says {attr} {found}; using the {given} you gave")
        setattr(ctx, attr, given)


def _start(ctx: Context, launch: LaunchSpec, notes: list[str]) -> Any:
    assert ctx.launcher is not None   # diagnose() gives every launch target one
    launch = launch.with_port(free_port())
    ctx.launch = launch
    ctx.progress(f"starting the server: {launch.shell_command()[:160]}")
    try:
        server = ctx.launcher.start(launch, ctx.workdir / "server-baseline.log")
    except SpecdoctorError as exc:
        notes.append(f"the server did not start: {exc.problem}"
                     + (f" ({exc.fix})" if exc.fix else ""))
        ctx.server_logs["baseline"] = common.read_text(
            ctx.workdir / "server-baseline.log")
        ctx.errors = [exc.problem.splitlines()[0]]
        return None
    ctx.url = server.url
    ctx.baseline_server = server
    ctx.started_fresh = True
    return server


def _measure(ctx: Context, opts: Options, notes: list[str]) -> None:
    runs = []
    if opts.greedy:
        # twice on the same prompts: a correct engine keeps nothing from one request to the
        # next that changes its acceptance (experiments/repeat.py)
        runs += [("greedy", 0.0, 1.0, 1), ("greedy again", 0.0, 1.0, 1)]
    if opts.sampled is not None:
        runs.append(("sampled", opts.sampled[0], opts.sampled[1], 1))
    if opts.concurrency8:
        runs.append(("greedy c=8", 0.0, 1.0, 8))
    for label, t, p, c in runs:
        ctx.progress(f"measuring {label} ({len(ctx.prompts)} prompts x {ctx.max_tokens} tokens)")
        try:
            if c > 1:
                loaded = common.measure_loaded(ctx, ctx.url or "", common.params(ctx, t, p, c))
                m = loaded.measurement
                if loaded.reference is not None:
                    ctx.measured[common.LOAD_REFERENCE] = loaded.reference
                if len(loaded.seen) > 1 or not loaded.reached:
                    notes.append(f"{label}: {loaded.words()}"
                                 + ("" if loaded.reached else ": the load was not reached, so "
                                    "this pass says nothing about load"))
            else:
                m = common.measure_url(ctx, ctx.url or "", common.params(ctx, t, p, c))
        except SpecdoctorError as exc:
            notes.append(f"{label}: {exc}")
            ctx.errors.append(str(exc))
            continue
        ctx.measured[label] = m
        if m.error:
            notes.append(f"{label}: {m.error}")
            ctx.errors.append(m.error)


def _read_logs(ctx: Context, paths: tuple[Path, ...], opts: Options, notes: list[str]) -> None:
    """The logs' evidence (diagnose.log_evidence): profile, windows, method, k, spec-off."""
    from specdoctor.diagnose.log_evidence import read_for_diagnosis

    ev = read_for_diagnosis(paths, opts.engine, method=opts.method, k=opts.k)
    notes += ev.notes
    for p in paths:
        ctx.server_logs[str(p)] = common.read_text(p)
    if ev.speculation_off:
        ctx.speculation_off = ev.speculation_off
    if ev.profile is None:
        return
    ctx.windows = tuple(ev.windows)
    ctx.log_total = ev.profile
    ctx.method = ctx.method or ev.method
    ctx.k = ctx.k if ctx.k is not None else ev.k


def _served_setup(ctx: Context, target: Target, opts: Options, notes: list[str]
                  ) -> dict[str, Any]:
    """A target that cannot be restarted: the setup the oracle and the static experiments need,
    from the user's flags, the start-up log, /v1/models and what was measured
    (diagnose.served); each value's origin and what stays unknown go to the notes."""
    from specdoctor.bench.measure import served_models
    from specdoctor.diagnose import served
    from specdoctor.sources.vllm_startup import startup_config

    cards = None
    if ctx.url is not None:
        try:
            cards = served_models(ctx.url)
        except SpecdoctorError as exc:
            notes.append(f"/v1/models: {exc.problem}")
    startup = None
    for p in target.logs:
        try:
            startup = startup_config(str(p)) or startup
        except OSError as exc:
            notes.append(f"{p}: start-up lines not read ({exc})")
    greedy = ctx.measured.get("greedy")
    setup = served.decide(
        served.Given(opts.target_dir, opts.draft_dir, opts.tokenizer_dir, opts.method, opts.k),
        cards, startup, log_method=ctx.method, log_k=ctx.k,
        measured_k=greedy.total.k if greedy is not None and greedy.total is not None else None,
        url=ctx.url or "the server")
    s = ctx.settings = setup.settings
    ctx.target_dir, ctx.draft_dir, ctx.tokenizer_dir = s.target, s.draft, s.tokenizer
    ctx.method, ctx.k = s.method, s.k
    notes += setup.notes
    if setup.origins or ctx.url is not None:
        notes.append(setup.summary())
    if setup.missing and ctx.url is not None:
        notes.append("the oracle still needs: " + "; ".join(setup.missing))
    return setup.to_json()


def _k_from_measurement(ctx: Context, notes: list[str]) -> None:
    """A command that does not say k (a default the engine fills in): the greedy measurement's
    per-position counts do."""
    greedy = ctx.measured.get("greedy")
    if ctx.k is None and greedy is not None and greedy.total is not None and greedy.total.k:
        ctx.k = greedy.total.k
        notes.append(f"k {ctx.k}: from the greedy measurement's per-position counts")


def _oracle_first(ctx: Context, notes: list[str]) -> ExperimentResult | None:
    """The oracle is the preferred reference: computed before the signature when it can be."""
    exp = OracleGreedy()
    why = exp.unavailable(ctx)
    if why is not None:
        notes.append(f"reference: no oracle ({why})")
        return None
    ctx.progress("oracle: the acceptance these weights allow, greedy")
    try:
        return exp.run(ctx, ("draft-quality", *rules.ENGINE_SIDE))
    except Exception as exc:  # a crashing experiment must not end the diagnosis
        notes.append(f"oracle failed: {type(exc).__name__}: {exc}")
        _keep_traceback(ctx, "oracle-greedy")
        return None


def _sampled_oracle_first(ctx: Context, notes: list[str]) -> ExperimentResult | None:
    """Whenever a sampled pass was measured, its oracle is computed before the signature: a
    sampled measurement that is not below greedy can still be far above what a correct
    verifier accepts (a rejection test that accepts every draft), and only the sampled oracle
    shows it."""
    if "sampled" not in ctx.measured:
        return None
    exp = OracleSampled()
    why = exp.unavailable(ctx)
    if why is not None:
        notes.append(f"sampled reference: no sampled oracle ({why}); sampled is compared "
                     f"with greedy only")
        return None
    ctx.progress("oracle: the acceptance a correct verifier gives, sampled")
    try:
        return exp.run(ctx, ("rejection-sampler", "sampling-confound", "engine-drafting"))
    except Exception as exc:  # noqa: BLE001 - a crashing experiment must not end the diagnosis
        notes.append(f"sampled oracle failed: {type(exc).__name__}: {exc}")
        _keep_traceback(ctx, "oracle-sampled")
        return None


def weak_lookup(sig: Signature, facts: Facts) -> tuple[str, ...]:
    """``zero`` leaves draft-quality out because a trained drafter that never agrees is broken
    (rule zero-not-weak); a drafter that is not trained (prompt lookup) that finds nothing to
    copy is weak for these prompts, so there draft-quality stays a candidate."""
    return ("draft-quality",) if sig.cls == "zero" and not facts.trained else ()


def kept_candidates(ctx: Context, facts: Facts) -> tuple[str, ...]:
    """Causes to keep as candidates whatever the signature.

    The oracle runs the served setup as configured (the drafter's files, its k): matching it
    clears the engine, not the setup, so those causes stay candidates whenever it is the
    reference. With no reference at all, the file-side counterfactuals (which need none) are
    the way to a verdict. An engine that is not significantly off its greedy oracle but not
    shown within 5% of it either may lose acceptance inside the interval however the symptom
    reads, so the replay's leads stay candidates (``rules.replay_leads_open``)."""
    oracle = facts.reference is not None and facts.reference.source == "oracle"
    kept: tuple[str, ...] = ()
    if ctx.draft_dir is not None and (facts.reference is None or oracle):
        kept += rules.FILE_SIDE
    if oracle:
        kept += tuple(h for h in rules.ORACLE_SHARED if h not in rules.FILE_SIDE)
    if rules.replay_leads_open(ctx.oracle_gap):
        kept += rules.REPLAY_LEADS
    return kept


def _as_served_vocabulary(ctx: Context, notes: list[str]) -> None:
    """A drafter whose tokenizer is not the target's is run by the engine on the target's ids as
    they are; the oracle must read them the same way to reproduce what the engine does."""
    from specdoctor.experiments.vocab import as_served_map

    try:
        path = as_served_map(ctx)
    except (OSError, ValueError) as exc:
        notes.append(f"vocabulary: could not compare the tokenizers ({exc})")
        return
    if path is not None:
        ctx.oracle_vocab_map = path
        notes.append("the drafter's tokenizer gives some ids other tokens than the target's; "
                     "the oracle reads its ids the way the engine does")


def _speed_check_wanted(ctx: Context, opts: Options, sig: Signature) -> bool:
    """Speed can be asked about when acceptance looks healthy (or has nothing to compare
    with) and the command can be relaunched."""
    return (opts.spec_off and ctx.launch is not None and ctx.launcher is not None
            and "greedy" in ctx.measured and sig.shape in ("healthy", "unreferenced"))


def _spec_off_first(ctx: Context, notes: list[str]) -> ExperimentResult | None:
    """The spec-off baseline, measured before the final signature: "slower than spec-off
    despite healthy acceptance" is a signature only once it is known."""
    from specdoctor.experiments.relaunch import SpecOffBaseline, time_spec_on

    try:
        time_spec_on(ctx)
    except SpecdoctorError as exc:
        notes.append(f"speed: the extra timing pass with speculation failed ({exc})")
    server = ctx.baseline_server
    if server is not None and ctx.launcher is not None:
        ctx.launcher.stop(server)  # one server at a time
        ctx.baseline_server, ctx.url = None, None
    try:
        return SpecOffBaseline().run(ctx, ("draft-overhead",))
    except Exception as exc:  # noqa: BLE001 - a crashing experiment must not end the diagnosis
        notes.append(f"spec-off baseline failed: {type(exc).__name__}: {exc}")
        _keep_traceback(ctx, "spec-off-baseline")
        return None


def _facts(ctx: Context, opts: Options, oracle_result: ExperimentResult | None) -> Facts:
    greedy = ctx.measured.get("greedy")
    profile = greedy.total if greedy is not None else ctx.log_total
    oracle_ref = None
    if oracle_result is not None and ctx.oracle_greedy is not None:
        oracle_ref = references.reference_from_profile(
            expected_profile(ctx.oracle_greedy), "oracle (greedy, same prompts)", "oracle",
            "computed from the served weights", tolerance=0.05)
    user = references.load_user_reference(opts.reference_file) if opts.reference_file else None
    published = references.published_for(ctx.method, ctx.k, references.served_of(ctx))
    sampled = ctx.measured.get("sampled")
    errors = list(ctx.errors)
    for text in ctx.server_logs.values():
        errors += error_lines(text, 5)
    return Facts(
        greedy=profile,
        reference=references.choose(oracle_ref, user, published),
        sampled=sampled.total if sampled is not None else None,
        sampled_gap=ctx.oracle_sampled_gap,
        sampled_label="T={:g}, top_p={:g}".format(*opts.sampled) if opts.sampled else "",
        concurrent=(ctx.measured["greedy c=8"].total
                    if "greedy c=8" in ctx.measured
                    and common.load_reached(ctx.measured["greedy c=8"]) else None),
        repeat=repeat_fall(ctx),
        greedy_again=(ctx.measured["greedy again"].total if "greedy again" in ctx.measured
                      else None),
        concurrent_reference=(ctx.measured[common.LOAD_REFERENCE].total
                              if common.LOAD_REFERENCE in ctx.measured else None),
        windows=tuple(ctx.windows),
        errors=tuple(errors),
        tok_s=greedy.output_tok_s if greedy is not None else None,
        tok_s_spec_off=ctx.tok_s_spec_off,
        method=ctx.method, k=ctx.k, speculation_off=ctx.speculation_off)


def _run_plan(ctx: Context, ledger: Ledger, cat: Any, opts: Options, t0: float, server: Any,
              saver: Saver, only: tuple[str, ...] | None = None) -> Any:
    """The ledger's experiments cheapest first (``only``: just for these hypotheses)."""
    ctx.deadline = t0 + opts.budget_min * 60   # experiments that repeat runs stop here
    holding: tuple[str, ...] = ()
    for step in ledger.plan(cat, opts.restart_min):
        _gaps(ctx, ledger)
        if only is not None:
            step = replace(step, hypotheses=tuple(h for h in step.hypotheses if h in only))
            if not step.hypotheses:
                continue
        if ledger.explained(cat):
            held = _held_by_contract(ctx, ledger)
            if not held:
                holding = ()
                _close_explained(ctx, ledger)
                break
            if held != holding:
                holding = held
                _say_held(ctx, ledger, held)
            step = replace(step, hypotheses=tuple(h for h in step.hypotheses if h in held))
            if not step.hypotheses:
                continue
        open_h = tuple(h for h in step.hypotheses if ledger.entry(h) is not None
                       and ledger.entry(h).verdict in (Verdict.PENDING, Verdict.INCONCLUSIVE))
        if not open_h or (step.experiment in RUN_EARLY and
                          any(r.experiment == step.experiment for r in ledger.results)):
            continue   # run before the signature: its verdict stands, it is not run twice
        spec = cat.experiments[step.experiment]
        exp = catalogue_mod.experiment(spec)
        if exp is None:
            ledger.mark(open_h, Verdict.INCONCLUSIVE, spec.planned_text(), step.experiment)
            continue
        why = exp.unavailable(ctx)
        if why is not None:
            if ctx.launch is None and "launch" in spec.needs:
                why += (f"; to run it: specdoctor diagnose --launch '<the command that "
                        f"starts {ctx.url or 'the server'}>' (with --env K=V for its environment)")
            ledger.mark(open_h, Verdict.INCONCLUSIVE, f"not run: {why}", step.experiment)
            continue
        spent = (time.monotonic() - t0) / 60
        need = spec.cost.minutes(opts.restart_min)
        if spent + need > opts.budget_min:
            ledger.mark(open_h, Verdict.PENDING, f"not run: over the budget ({spent:.1f} of "
                        f"{opts.budget_min:g} min spent, needs about {need:g})", step.experiment)
            continue
        if spec.cost.restarts and server is not None and ctx.launcher is not None:
            ctx.launcher.stop(server)  # one server at a time: relaunches need the machine
            server, ctx.url = None, None
        ctx.progress(f"experiment {step.experiment} → {', '.join(open_h)}")
        t1 = time.perf_counter()
        try:
            result = exp.run(ctx, open_h)
        except Exception as exc:  # a crashing experiment is inconclusive; the diagnosis goes on
            _keep_traceback(ctx, step.experiment)
            result = ExperimentResult(step.experiment, [
                Finding(h, Verdict.INCONCLUSIVE, f"the experiment crashed: "
                        f"{type(exc).__name__}: {exc}") for h in open_h],
                error=f"{type(exc).__name__}: {exc}")
        result.wall_s = result.wall_s or time.perf_counter() - t1
        ledger.apply(result)
        _redecide_draft_quality(ctx, ledger)
        saver.save(ledger.signature, ledger)
    else:
        if holding and ledger.explained(cat):
            _close_explained(ctx, ledger)
    return server


def _gaps(ctx: Context, ledger: Ledger) -> None:
    """The gap each pass asks a cause to explain (rule cause-sized): the greedy and the
    sampled measurement against their oracles, where computed."""
    ledger.gaps = {k: g for k, g in (("greedy", ctx.oracle_gap),
                                     ("sampled", ctx.oracle_sampled_gap)) if g is not None}


def _close_explained(ctx: Context, ledger: Ledger) -> None:
    """The plan stops: every symptom has a confirmed cause; what was not run says so."""
    root, _ = ledger.root_cause()
    ctx.progress("every symptom has a confirmed cause: stopping")
    for e in ledger.entries:
        if e.verdict is Verdict.PENDING and not e.evidence:
            e.evidence.append(f"not run: every symptom already has a confirmed cause "
                              f"({root})")


def _held_by_contract(ctx: Context, ledger: Ledger) -> tuple[str, ...]:
    """Rule drafting-not-config (``rules.held_by_contract``): the causes a replay's drafting
    verdict must not close while the drafter's contract names a lead for them, with the value
    to set, that no relaunch has checked."""
    relaunched = any(r.experiment == "relaunch-counterfactual" for r in ledger.results)
    findings = ledger.findings()
    if not rules.held_by_contract(findings, rules.CONTRACT_CAUSES, relaunched):
        return ()   # nothing could be held: the contract is not read
    from specdoctor.experiments.counterfactual import review_for

    # a lead with a reference value (a search over every fitting value names none to set)
    named = {x.hypothesis for x in review_for(ctx).leads if not x.search}
    return rules.held_by_contract(findings, named, relaunched)


def _say_held(ctx: Context, ledger: Ledger, held: tuple[str, ...]) -> None:
    ctx.progress("the drafting difference is confirmed, but the drafter's contract names a "
                 f"lead not checked yet: relaunching for {', '.join(held)} first")
    ledger.apply(ExperimentResult("rule:drafting-not-config", [Finding(
        h, Verdict.PENDING, "the replay found the engine's drafts differ from the drafter's "
        "chain on the served files; the drafter's contract names a lead on a served field for "
        "this cause, which a relaunch with the field set to its reference decides before the "
        "drafting difference is taken as the engine's") for h in held]))


def _restate_drafting(ctx: Context, ledger: Ledger) -> None:
    """A drafting difference found by the replay and a cause confirmed by a counterfactual:
    the replay's share is of what the replay saw off a correct engine, the counterfactual's of
    the room up to k. The drafting loss is restated in the counterfactual's unit (accepted per
    step, as a share of the room above the measured acceptance: ``rules.drafting_share``) so
    that ``root_cause`` orders the two by what each costs."""
    e = ledger.entry("engine-drafting")
    if e is None or e.verdict is not Verdict.CONFIRMED or e.basis != "replay":
        return
    cfs = [x for x in ledger.entries if x.verdict is Verdict.CONFIRMED
           and x.basis == "counterfactual" and x.hypothesis != e.hypothesis]
    greedy = ctx.measured.get("greedy")
    replay = next((r for r in reversed(ledger.results) if r.experiment == "replay"), None)
    if not cfs or greedy is None or greedy.total is None or replay is None or not ctx.k:
        return
    drafting = (replay.numbers.get("localisation") or {}).get("drafting") or {}
    losses = [float(d["expected_chain"]) - float(d["expected_engine"])
              for d in drafting.values() if d.get("differs")]
    if not losses:
        return
    loss, before = max(losses), common.apd(greedy.total)
    e.recovered = share = rules.drafting_share(loss, before, float(ctx.k))
    best = max(cfs, key=lambda x: x.recovered or 0.0)
    e.evidence.append(
        f"[rule:drafting-share] restated: the drafting loss the replay measured, {loss:.3f} "
        f"accepted per step, is {share:.0%} of the room above the measured {before:.3f} up to "
        f"{ctx.k}; {best.hypothesis} recovered {best.recovered or 0.0:.0%} of it by "
        f"counterfactual. The drafting difference was measured on the served files; it was "
        f"not measured again with {best.hypothesis} fixed")


def _against_recovery(sig: Signature, facts: Facts, ledger: Ledger, root: str | None,
                      notes: list[str]) -> Signature:
    """When a counterfactual recovered acceptance, the recovered curve is what the served setup
    should give: the final signature is stated against it (the oracle of the served files
    shares their error, so against the oracle the symptom could read healthy)."""
    if root is None:
        return sig
    for r in ledger.results:
        decided = [f for f in r.findings if f.hypothesis == root and f.verdict is Verdict.CONFIRMED]
        after = [(k, v) for k, v in r.curves.items() if k.startswith("after ")]
        if decided and after:
            name, prof = max(after, key=lambda kv: common.apd(kv[1]))
            ref = references.reference_from_profile(prof, f"counterfactual {name[6:]}",
                                                    "counterfactual", tolerance=0.05)
            if ref is None:
                return sig
            final = classify(replace(facts, reference=ref))
            if final.cls != sig.cls:
                notes.append(f"signature against the served files' own oracle: {sig.cls} "
                             f"({sig.evidence})")
            return final
    # Confirmed without a recovered curve (k past the trained depth, say): the oracle ran the
    # same setup, so "healthy" against it says nothing about the cause; state the symptom
    # against the published figures for this method and k where there are some.
    if sig.cls == "healthy" and facts.reference is not None \
            and facts.reference.source == "oracle" and facts.greedy is not None:
        published = references.published_for(facts.method, facts.greedy.k)
        if published is not None:
            final = classify(replace(facts, reference=published))
            if final.cls != sig.cls:
                notes.append(f"signature against the served setup's own oracle: {sig.cls} "
                             f"({sig.evidence}); the oracle runs the same k, so it shares "
                             f"{root}")
                return final
    return sig


def _redecide_draft_quality(ctx: Context, ledger: Ledger) -> None:
    """draft-quality waits for the file-side counterfactuals (rule oracle-equal-low) and is
    confirmed, by elimination, only once every rival the ledger holds was excluded (rule
    elimination-needs-all: ``rules.ELIMINATION_RIVALS``)."""
    gap = ctx.oracle_gap
    e = ledger.entry("draft-quality")
    if gap is None or e is None or e.verdict is not Verdict.INCONCLUSIVE:
        return
    side = [ledger.entry(h) for h in rules.FILE_SIDE]
    rivals = [ledger.entry(h) for h in rules.ELIMINATION_RIVALS["draft-quality"]]
    excluded = all(x is None or x.verdict is Verdict.EXCLUDED for x in rivals)
    confirmed_other = any(x is not None and x.verdict is Verdict.CONFIRMED for x in side)
    if confirmed_other:
        ledger.apply(ExperimentResult("rule:oracle-equal-low", [Finding(
            "draft-quality", Verdict.EXCLUDED,
            "a counterfactual on the served files recovered acceptance: the drafter is not "
            "weak, its files are wrong")]))
        return
    if excluded:
        ledger.apply(ExperimentResult("rule:oracle-equal-low", rules.decide_oracle(
            gap, ctx.oracle_pos0, file_side_excluded=True,
            reference_low=ctx.oracle_below_method, trained=rules.trained_drafter(ctx.method))))


def _keep_traceback(ctx: Context, name: str) -> Path | None:
    path = ctx.workdir / f"crash-{name}.txt"
    try:
        path.write_text(traceback.format_exc())
    except OSError:
        return None
    return path
