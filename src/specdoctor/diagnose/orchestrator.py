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

from specdoctor.diagnose import catalogue as catalogue_mod
from specdoctor.diagnose import evidence, references, settle
from specdoctor.diagnose.ledger import Ledger, build
from specdoctor.diagnose.signature import Facts, Signature, classify, too_few_to_tell
from specdoctor.diagnose.target import Options, Target
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context, Launcher
from specdoctor.launch import Servers
from specdoctor.verdict import rules
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp"}
# The experiments of the catalogue's phases outside the plan: the plan does not run them again.
RUN_EARLY = tuple(e for p in ("before-signature", "after-plan")
                  for e in catalogue_mod.load().in_phase(p))


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

    @property
    def root_cause_mechanism(self) -> dict[str, str] | None:
        """The mechanism within the root cause an experiment found (the replay's
        transformation that reproduces the engine's drafts), if any."""
        if self.root_cause is None:
            return None
        from specdoctor.oracle import transforms

        for r in self.ledger.results:
            for f in r.findings:
                if (f.hypothesis == self.root_cause and f.mechanism
                        and f.verdict is Verdict.CONFIRMED):
                    try:
                        t = transforms.by_id(f.mechanism)
                    except KeyError:
                        return {"id": f.mechanism, "family": "", "text": "",
                                "experiment": r.experiment}
                    return {"id": t.id, "family": t.family, "text": t.mechanism,
                            "experiment": r.experiment}
        return None

    def to_json(self) -> dict[str, Any]:
        return {"signature": {"class": self.signature.cls,
                              "evidence": self.signature.evidence},
                "ledger": [{"id": e.hypothesis, "cost": e.cost.to_json(),
                            "verdict": e.verdict.value, "evidence": e.evidence,
                            "experiment": e.experiment, "basis": e.basis}
                           for e in self.ledger.entries],
                "root_cause": self.root_cause, "root_cause_basis": self.root_cause_basis,
                "root_cause_mechanism": self.root_cause_mechanism,
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
    ctx = evidence.context(target, opts, servers, progress)
    notes: list[str] = []
    part = _Partial()
    try:
        _investigate(ctx, target, opts, saver, notes, part)
        assert part.sig is not None and part.ledger is not None and part.facts is not None
        part.step = "deciding the root cause"
        answer, sig = settle.decide(ctx, part.ledger, part.sig, part.facts, notes)
        root, others = answer.root, answer.others
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
        evidence.start(ctx, target.launch, notes)
    if target.logs:
        # before measuring: a live server's log then holds its own traffic only, not the
        # requests this diagnosis sends (greedy, then sampled: they would read as drift)
        part.step = "reading the logs"
        evidence.read_logs(ctx, target.logs, opts, notes)
    if ctx.url is not None:
        part.step = "measuring"
        evidence.measure(ctx, opts, notes)
        for p in target.logs:   # what the server logged while measured (errors) is read too
            ctx.server_logs[str(p)] = common.read_text(p)
    if ctx.baseline_server is not None:
        ctx.server_logs["baseline"] = common.read_text(
            ctx.baseline_server.log_path)
    if target.launch is None:
        part.step = "reading what the server tells of its setup"
        part.served = evidence.served_setup(ctx, target, opts, notes)
    evidence.user_setup(ctx, opts, notes)
    evidence.gguf_models(ctx, notes)
    evidence.k_from_measurement(ctx, notes)
    part.step = "computing the oracle"
    evidence.as_served_vocabulary(ctx, notes)
    oracle_result, sampled_result, facts, sig = _symptom(ctx, opts, notes, part)
    if too_few_to_tell(facts.greedy) and evidence.measure_longer(ctx, opts, notes):
        oracle_result, sampled_result, facts, sig = _symptom(ctx, opts, notes, part)
    if sig.cls == "unreferenced":
        notes.append(evidence.no_reference(ctx.method, ctx.k, references.served_of(ctx)))
    _method_reference(ctx, opts)   # sizes a weak drafter (settle.weak_sized)
    cat = catalogue_mod.load()
    also = settle.kept_candidates(ctx, facts) + settle.weak_lookup(sig, facts)
    part.ledger = ledger = build(sig, cat, opts.restart_min, also=also)
    for early in (oracle_result, sampled_result):
        if early is not None:
            ledger.apply(early)
    settle.gaps(ctx, ledger)
    saver.save(sig, ledger)
    part.step = "running the experiments"
    t_plan = time.monotonic()
    if not ledger.entries:
        ctx.progress(f"{sig.cls}: no candidate to test")
    else:
        _run_plan(ctx, ledger, cat, opts, t_plan, ctx.baseline_server, saver)
    settle.draft_quality(ctx, ledger)
    _speed_last(ctx, opts, cat, saver, notes, part, t_plan)
    if "crash" in sig.classes or not ctx.measured and ctx.log_total is None:
        part.step = "running the static experiments beside the crash"
        _static_whatever(ctx, ledger, cat, notes)
        saver.save(sig, ledger)


def _symptom(ctx: Context, opts: Options, notes: list[str], part: _Partial
             ) -> tuple[ExperimentResult | None, ExperimentResult | None, Facts, Signature]:
    """The oracles, then the signature they are the reference of (phase before-signature):
    the sampled oracle runs whenever a sampled pass was measured (a rejection test that accepts
    every draft is not below greedy, only above its oracle)."""
    oracle_result = _early(ctx, "oracle-greedy", notes)
    sampled_result = (_early(ctx, "oracle-sampled", notes)
                      if oracle_result is not None and ctx.measured.sampled is not None else None)
    part.step = "classifying the symptom"
    part.facts = facts = evidence.facts(ctx, opts, oracle_result)
    part.sig = sig = classify(facts)
    return oracle_result, sampled_result, facts, sig


def _static_whatever(ctx: Context, ledger: Ledger, cat: Any, notes: list[str]) -> None:
    """Every experiment the catalogue marks ``beside_crash`` (they need no server) not run yet,
    on the launch's own layout and files, whatever the server did (docs/diagnose.md, "A server
    that cannot start"), each asked about every hypothesis it settles. Their findings join the
    ledger where it holds the hypothesis; every result is kept in the ledger's experiments (the
    report's Experiments section) and summed up in a note, so a lead (Case B's dropped
    decode_context_parallel_size) is reported beside the crash without becoming its cause."""
    ran = {r.experiment for r in ledger.results}
    for spec in cat.experiments.values():
        if spec.id in ran or not spec.beside_crash:
            continue
        exp = catalogue_mod.experiment(spec)
        if exp is None:
            continue
        why = _not_run(ctx, spec, exp)
        if why is not None:
            said = (f"not run ({why.removeprefix('not run: ')})" if why.startswith("not run: ")
                    else why)
            notes.append(f"beside the crash: {spec.id} {said}")
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
    method_ref = _method_reference(ctx, opts)
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
    settle.draft_quality(ctx, ledger)


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
    also = settle.kept_candidates(ctx, facts)
    added = ledger.extend(build(against, cat, opts.restart_min, also=also).entries,
                          opts.restart_min)
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

@dataclass(frozen=True)
class _Words:
    """What the progress line and the notes say of an experiment run outside the plan."""

    doing: str          # the progress line
    without: str | None  # the note when it cannot run ({why}); None: its caller decided
    failed: str         # the note's start when it crashes


# The experiments of the catalogue's phases before-signature and after-plan: what is said of
# each (when each runs is the catalogue's; what each is asked about is its ``asked``).
_EARLY_WORDS = {
    "oracle-greedy": _Words("oracle: the acceptance these weights allow, greedy",
                            "reference: no oracle ({why})", "oracle failed"),
    "oracle-sampled": _Words("oracle: the acceptance a correct verifier gives, sampled",
                             "sampled reference: no sampled oracle ({why}); sampled is "
                             "compared with greedy only", "sampled oracle failed"),
    "spec-off-baseline": _Words("", None, "spec-off baseline failed"),
}


def _early(ctx: Context, exp_id: str, notes: list[str]) -> ExperimentResult | None:
    """One experiment of a phase outside the plan, asked about what the catalogue says; None,
    with a note, where it cannot run or crashes (the diagnosis goes on without it)."""
    spec, words = catalogue_mod.load().experiments[exp_id], _EARLY_WORDS[exp_id]
    exp = catalogue_mod.experiment(spec)
    assert exp is not None, f"{exp_id} is built"
    if words.without is not None:
        why = exp.unavailable(ctx)
        if why is not None:
            notes.append(words.without.format(why=why))
            return None
    if words.doing:
        ctx.progress(words.doing)
    try:
        return exp.run(ctx, spec.asked)
    except Exception as exc:  # noqa: BLE001 - a crashing experiment must not end the diagnosis
        notes.append(f"{words.failed}: {type(exc).__name__}: {exc}")
        _keep_traceback(ctx, exp_id)
        return None


def _speed_check_wanted(ctx: Context, opts: Options, sig: Signature) -> bool:
    """Speed can be asked about when acceptance looks healthy (or has nothing to compare
    with) and the command can be relaunched."""
    return (opts.spec_off and ctx.launch is not None and ctx.launcher is not None
            and ctx.measured.greedy is not None and sig.shape in ("healthy", "unreferenced"))


def _spec_off_first(ctx: Context, notes: list[str]) -> ExperimentResult | None:
    """The spec-off baseline, measured before the final signature: "slower than spec-off
    despite healthy acceptance" is a signature only once it is known."""
    from specdoctor.experiments.relaunch import time_spec_on

    try:
        time_spec_on(ctx)
    except SpecdoctorError as exc:
        notes.append(f"speed: the extra timing pass with speculation failed ({exc})")
    server = ctx.baseline_server
    if server is not None and ctx.launcher is not None:
        ctx.launcher.stop(server)  # one server at a time
        ctx.baseline_server, ctx.url = None, None
    return _early(ctx, "spec-off-baseline", notes)


def _run_plan(ctx: Context, ledger: Ledger, cat: Any, opts: Options, t0: float, server: Any,
              saver: Saver, only: tuple[str, ...] | None = None) -> Any:
    """The ledger's experiments cheapest first (``only``: just for these hypotheses)."""
    ctx.deadline = t0 + opts.budget_min * 60   # experiments that repeat runs stop here
    holding: tuple[str, ...] = ()
    for step in ledger.plan(cat, opts.restart_min):
        settle.gaps(ctx, ledger)
        if only is not None:
            step = replace(step, hypotheses=tuple(h for h in step.hypotheses if h in only))
            if not step.hypotheses:
                continue
        if ledger.explained(cat):
            held = settle.held_by_contract(ctx, ledger)
            if not held:
                holding = ()
                settle.close_explained(ctx, ledger)
                break
            if held != holding:
                holding = held
                settle.say_held(ctx, ledger, held)
            step = replace(step, hypotheses=tuple(h for h in step.hypotheses if h in held))
            if not step.hypotheses:
                continue
        open_h = tuple(h for h in step.hypotheses if ledger.entry(h) is not None
                       and (ledger.entry(h).verdict in (Verdict.PENDING, Verdict.INCONCLUSIVE)
                            or ledger.undersized(h, step.experiment)))
        if not open_h or (step.experiment in RUN_EARLY and
                          any(r.experiment == step.experiment for r in ledger.results)):
            continue   # run before the signature: its verdict stands, it is not run twice
        spec = cat.experiments[step.experiment]
        exp = catalogue_mod.experiment(spec)
        if exp is None:
            ledger.mark(open_h, Verdict.INCONCLUSIVE, spec.planned_text(), step.experiment)
            continue
        why = _not_run(ctx, spec, exp)
        static = _static_answer(ctx, exp, open_h) if why is not None else None
        if static is not None:
            # not applicable to this engine, but with nothing to run it answers from the files
            ledger.apply(static)
            settle.draft_quality(ctx, ledger)
            saver.save(ledger.signature, ledger)
            continue
        if why is not None:
            if ctx.launch is None and "launch" in spec.needs and why.startswith("not run"):
                why += _how_to_run(spec.needs, ctx.url)
            ledger.mark(open_h, Verdict.INCONCLUSIVE, why, step.experiment)
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
        settle.draft_quality(ctx, ledger)
        saver.save(ledger.signature, ledger)
    else:
        if holding and ledger.explained(cat):
            settle.close_explained(ctx, ledger)
    return server


def _not_run(ctx: Context, spec: Any, exp: Any) -> str | None:
    """Why an experiment is not run here, as the ledger says it: not applicable to the served
    engine (the catalogue's ``not_on``: never run, its hypotheses stay open), or not run (what
    it needs is missing); None when it runs."""
    na = spec.not_applicable(ctx.engine)
    if na is not None:
        return f"not applicable to {ENGINE_NAMES.get(ctx.engine or '', ctx.engine)}: {na}"
    why = exp.unavailable(ctx)
    return None if why is None else f"not run: {why}"


def _method_reference(ctx: Context, opts: Options) -> Any:
    """What a healthy drafter of this method reaches at this k (``evidence.method_reference``:
    the published figure or the user's), left in ``ctx.method_reference`` for the experiments
    and the rules; None where nothing says."""
    ref = evidence.method_reference(ctx.method, ctx.k, opts.reference_file,
                                    references.served_of(ctx))
    if ref is not None:
        ctx.method_reference = (ref.words(), ref.accepted_per_draft)
    return ref


def _static_answer(ctx: Context, exp: Any, hypotheses: tuple[str, ...]
                   ) -> ExperimentResult | None:
    """What an experiment that cannot run here answers without running (``without_running``:
    a relaunch with nothing to relaunch for answers from the drafter's files alone); None
    where it would have to run."""
    answer = getattr(exp, "without_running", None)
    if answer is None:
        return None
    try:
        return answer(ctx, hypotheses)
    except Exception:  # noqa: BLE001 - the experiment then stays not run, as before
        _keep_traceback(ctx, exp.id)
        return None


def _how_to_run(needs: tuple[str, ...], url: str | None) -> str:
    """What to give so that an experiment that needs a launch command runs: --launch, unless it
    also needs log windows over uptime, which only --logs gives, and one diagnosis is not given
    both."""
    if "windows" in needs:
        return ("; a --launch diagnosis has no log windows over uptime, so it does not run "
                "there either: there the same prompts are measured twice on one server "
                "(repeat-ab)")
    return (f"; to run it: specdoctor diagnose --launch '<the command that starts "
            f"{url or 'the server'}>' (with --env K=V for its environment)")


def _keep_traceback(ctx: Context, name: str) -> Path | None:
    path = ctx.workdir / f"crash-{name}.txt"
    try:
        path.write_text(traceback.format_exc())
    except OSError:
        return None
    return path
