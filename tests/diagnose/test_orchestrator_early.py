"""What the diagnosis decides before its plan: when speed with speculation off is measured,
which file-side causes stay candidates, and when the oracle can stand in for a relaunch.

Profiles are the recorded ones of real lab runs (tests/diagnose/recorded.py)."""

from __future__ import annotations

import sys

from specdoctor.diagnose import orchestrator
from specdoctor.diagnose import evidence, settle
from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose.references import reference_from_profile
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.experiments.base import Context
from specdoctor.experiments.counterfactual import OracleCounterfactual
from specdoctor.verdict.rules import Gap
from specdoctor.launch import LaunchSpec
from tests.diagnose.recorded import counts

LAUNCH = LaunchSpec((sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/a"))


class NoLauncher:
    def start(self, launch, log_path):  # pragma: no cover - never called here
        raise AssertionError("nothing starts in these tests")

    def stop(self, server):  # pragma: no cover
        raise AssertionError

    def stop_all(self):
        pass


NO_LAUNCHER = NoLauncher()


def _ctx(tmp_path, launch=LAUNCH, launcher=NO_LAUNCHER, draft=None):
    ctx = Context(workdir=tmp_path, launch=launch, launcher=launcher, draft_dir=draft)
    ctx.measured.greedy = object()
    return ctx


HEALTHY = counts([1.0, 1.0, 1.0, 1.0])
ROPE = counts([0.40, 0.11, 0.04, 0.02])   # LAB.md: the rope-theta drafter against itself


def _sig(measured, reference=HEALTHY):
    ref = reference_from_profile(reference, "oracle", "oracle", tolerance=0.05)
    return classify(Facts(measured, ref, method="draft_model"))


def test_speed_is_measured_when_acceptance_is_healthy_and_the_command_can_be_rerun(tmp_path):
    opts = orchestrator.Options(workdir=tmp_path)
    assert orchestrator._speed_check_wanted(_ctx(tmp_path), opts, _sig(HEALTHY))
    # acceptance trouble comes first
    assert not orchestrator._speed_check_wanted(_ctx(tmp_path), opts, _sig(ROPE))
    # nothing to relaunch, or the user said no
    assert not orchestrator._speed_check_wanted(_ctx(tmp_path, launch=None), opts, _sig(HEALTHY))
    assert not orchestrator._speed_check_wanted(_ctx(tmp_path, launcher=None), opts,
                                                _sig(HEALTHY))
    off = orchestrator.Options(workdir=tmp_path, spec_off=False)
    assert not orchestrator._speed_check_wanted(_ctx(tmp_path), off, _sig(HEALTHY))


def test_slower_than_spec_off_is_a_signature_once_the_baseline_is_known():
    ref = reference_from_profile(HEALTHY, "oracle", "oracle", tolerance=0.05)
    slow = classify(Facts(HEALTHY, ref, tok_s=56.0, tok_s_spec_off=300.0))
    assert slow.cls == "slower-than-spec-off" and "0.19x the spec-off" in slow.evidence


def test_file_side_causes_stay_candidates_with_the_oracle_or_no_reference(tmp_path):
    with_draft = _ctx(tmp_path, draft=tmp_path)
    oracle = Facts(HEALTHY, reference_from_profile(HEALTHY, "oracle", "oracle"))
    assert "tokenizer-mismatch" in settle.kept_candidates(with_draft, oracle)
    assert "draft-config-mismatch" in settle.kept_candidates(with_draft, Facts(ROPE))
    published = Facts(HEALTHY, reference_from_profile(HEALTHY, "paper", "published"))
    assert settle.kept_candidates(with_draft, published) == ()
    assert settle.kept_candidates(_ctx(tmp_path), Facts(ROPE)) == ()  # ngram, mtp: no files
    # the oracle runs the same k: k past the trained depth stays a candidate, files or not
    assert settle.kept_candidates(_ctx(tmp_path), oracle) == ("k-beyond-training",)


def test_the_oracle_counterfactual_stands_aside_when_the_engine_is_below_the_oracle(tmp_path):
    ctx = _ctx(tmp_path, draft=tmp_path)
    ctx.method, ctx.k, ctx.target_dir, ctx.prompts = "draft_model", 4, tmp_path, ("def f():",)
    assert OracleCounterfactual().unavailable(ctx) is None
    # measured 0.36 accepted per draft where the oracle of the same files gives 4.0: the
    # oracle does not read those files as the engine does
    ctx.oracle_gap = Gap(0.36, 4.0, 3.5, 3.8)
    assert "a relaunch decides" in OracleCounterfactual().unavailable(ctx)
    ctx.oracle_gap = Gap(0.36, 0.37, -0.05, 0.06)   # the engine reaches the oracle
    assert OracleCounterfactual().unavailable(ctx) is None


RAN: list[str] = []


class _Records:
    """Experiments that record that they ran and exclude what they are asked about."""

    def __init__(self, eid):
        self.id = eid

    def unavailable(self, ctx):
        return None

    def run(self, ctx, hypotheses):
        from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict

        RAN.append(self.id)
        return ExperimentResult(self.id, [Finding(h, Verdict.EXCLUDED, "x") for h in hypotheses])


def test_what_ran_before_the_signature_is_not_run_again(tmp_path, monkeypatch):
    import time

    from specdoctor.diagnose import catalogue
    from specdoctor.diagnose.ledger import build
    from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict

    ref = reference_from_profile(HEALTHY, "oracle", "oracle", tolerance=0.05)
    # the healthy-ngram clinic row: 0.88x on the first spec-off comparison (inconclusive)
    sig = classify(Facts(HEALTHY, ref, tok_s=345.0, tok_s_spec_off=392.1))
    assert sig.cls == "slower-than-spec-off"
    cat = catalogue.load()
    ledger = build(sig, cat, 2.0)
    ledger.apply(ExperimentResult("spec-off-baseline", [Finding(
        "draft-overhead", Verdict.INCONCLUSIVE, "0.88x: slower, not clearly")]))
    monkeypatch.setattr(catalogue, "experiment", lambda spec: _Records(spec.id))
    RAN.clear()
    ctx = _ctx(tmp_path, launcher=None)
    orchestrator._run_plan(ctx, ledger, cat, orchestrator.Options(workdir=tmp_path),
                           time.monotonic(), None, orchestrator.Saver(None, orchestrator.Target()))
    assert RAN and "spec-off-baseline" not in RAN
    assert ledger.entry("draft-overhead").verdict is Verdict.INCONCLUSIVE


def _speed_setup(tmp_path, monkeypatch, ratio_on):
    from specdoctor.diagnose import catalogue
    from specdoctor.diagnose.ledger import build
    from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
    from specdoctor.verdict.rules import FILE_SIDE

    monkeypatch.setattr(catalogue, "experiment", lambda spec: _Records(spec.id))
    RAN.clear()
    measured = []

    def spec_off(ctx, notes):
        measured.append(True)
        ctx.tok_s_spec_on, ctx.tok_s_spec_off = 546.5 * ratio_on, 546.5
        v = (Verdict.CONFIRMED if ratio_on < 0.7 else
             Verdict.INCONCLUSIVE if ratio_on < 0.95 else Verdict.EXCLUDED)
        return ExperimentResult("spec-off-baseline", [Finding("draft-overhead", v, "timed")])

    monkeypatch.setattr(orchestrator, "_spec_off_first", spec_off)
    ref = reference_from_profile(HEALTHY, "oracle", "oracle", tolerance=0.05)
    facts = Facts(HEALTHY, ref, method="draft_model")
    sig = classify(facts)
    cat = catalogue.load()
    part = orchestrator._Partial(sig, build(sig, cat, 2.0, also=FILE_SIDE), facts)
    return part, cat, measured, Verdict


def test_speed_is_asked_last_and_what_it_adds_is_tested(tmp_path, monkeypatch):
    import time

    # clearly slower (the wide drafter's 0.25x): confirmed, and it explains the symptom
    part, cat, measured, verdict = _speed_setup(tmp_path, monkeypatch, ratio_on=0.25)
    saver = orchestrator.Saver(None, orchestrator.Target())
    opts = orchestrator.Options(workdir=tmp_path)
    orchestrator._speed_last(_ctx(tmp_path), opts, cat, saver, [], part, time.monotonic())
    assert measured and part.sig.cls == "slower-than-spec-off"
    assert part.ledger.root_cause()[0] == "draft-overhead"
    assert "already has a confirmed cause" in part.ledger.entry("k-beyond-training").evidence[-1]
    # slower, not clearly (0.88x): the candidates slowness adds are tested, spec-off not twice
    part, cat, measured, verdict = _speed_setup(tmp_path, monkeypatch, ratio_on=0.88)
    orchestrator._speed_last(_ctx(tmp_path), opts, cat, saver, [], part, time.monotonic())
    assert part.ledger.entry("draft-overhead").verdict is verdict.INCONCLUSIVE
    assert "trained-depth" in RAN and "spec-off-baseline" not in RAN
    assert part.ledger.root_cause()[0] is None


def test_no_speed_question_once_a_cause_is_found(tmp_path, monkeypatch):
    import time

    from specdoctor.verdict.findings import ExperimentResult, Finding

    part, cat, measured, verdict = _speed_setup(tmp_path, monkeypatch, ratio_on=0.25)
    part.ledger.apply(ExperimentResult("oracle-counterfactual", [Finding(
        "draft-config-mismatch", verdict.CONFIRMED, "recovered", recovered=1.0)]))
    orchestrator._speed_last(_ctx(tmp_path), orchestrator.Options(workdir=tmp_path), cat,
                             orchestrator.Saver(None, orchestrator.Target()), [], part,
                             time.monotonic())
    assert not measured and part.sig.cls == "healthy"
    # nor past the budget
    notes: list[str] = []
    part, cat, measured, _ = _speed_setup(tmp_path, monkeypatch, ratio_on=0.25)
    orchestrator._speed_last(_ctx(tmp_path), orchestrator.Options(workdir=tmp_path,
                                                                 budget_min=1.0), cat,
                             orchestrator.Saver(None, orchestrator.Target()), notes, part,
                             time.monotonic())
    assert not measured and "over the budget" in notes[0]


def test_slower_because_acceptance_lost_turns_to_the_acceptance(tmp_path, monkeypatch):
    """The issue's degraded EAGLE3 head (0.54/0.29/0.17 equal to its own oracle, the published
    EAGLE3 figure 0.73/0.52/0.36): slower than spec-off, but a head this cheap would be faster
    with the acceptance the method reaches, so draft-overhead is excluded and the acceptance
    candidates join the ledger; with every rival excluded, draft-quality by elimination."""
    import time

    from specdoctor.diagnose import catalogue
    from specdoctor.diagnose.ledger import build
    from specdoctor.verdict import rules
    from specdoctor.verdict.findings import ExperimentResult, Verdict

    degraded = counts([0.54, 0.29, 0.17])
    monkeypatch.setattr(catalogue, "experiment", lambda spec: _Records(spec.id))
    RAN.clear()
    seen = {}

    def spec_off(ctx, notes):
        seen["reference"] = ctx.method_reference
        ctx.tok_s_spec_on, ctx.tok_s_spec_off = 0.85 * 100.0, 100.0
        split = rules.speed_split(0.85, degraded.accepted_per_draft, 3, ctx.method_reference)
        return ExperimentResult("spec-off-baseline", [rules.decide_speed_split(
            Verdict.CONFIRMED, split)], {"split": split.to_json()})

    monkeypatch.setattr(orchestrator, "_spec_off_first", spec_off)
    ref = reference_from_profile(degraded, "oracle", "oracle", tolerance=0.05)
    facts = Facts(degraded, ref, method="eagle3", k=3)
    sig = classify(facts)
    assert sig.cls == "healthy"
    cat = catalogue.load()
    ctx = _ctx(tmp_path)
    ctx.method, ctx.k = "eagle3", 3
    ctx.oracle_gap, ctx.oracle_pos0 = Gap(1.0, 1.0, -0.02, 0.02), 0.54
    kept = (*rules.FILE_SIDE, "k-beyond-training")
    part = orchestrator._Partial(sig, build(sig, cat, 2.0, also=kept), facts)
    for h in kept:   # the file-side counterfactuals ran before the speed question
        part.ledger.apply(ExperimentResult("oracle-counterfactual", [
            rules.Finding(h, Verdict.EXCLUDED, "no recovery", basis="counterfactual")]))
    notes: list[str] = []
    # the method's figure for this model and these prompts, as the user gives it (a published
    # figure is for its own model and prompts: not for the lab's prompts)
    mine = tmp_path / "eagle3-ref.json"
    mine.write_text('{"per_position": [0.730, 0.521, 0.355]}')
    orchestrator._speed_last(ctx, orchestrator.Options(workdir=tmp_path, reference_file=mine),
                             cat, orchestrator.Saver(None, orchestrator.Target()), notes, part,
                             time.monotonic())
    assert seen["reference"][0].startswith("user reference eagle3-ref.json")
    led = part.ledger
    assert led.entry("draft-overhead").verdict is Verdict.EXCLUDED
    assert "acceptance is what lost" in led.entry("draft-overhead").evidence[-1]
    assert any(n.startswith("acceptance against user reference") for n in notes)
    a = led.answer()
    assert (a.root, led.entry("draft-quality").basis) == ("draft-quality", "elimination")
    assert "below what the method reaches" in led.entry("draft-quality").evidence[-1]


def test_the_method_reference_is_the_published_or_the_users_higher(tmp_path):
    import json

    from specdoctor.diagnose.references import Served

    assert evidence.method_reference("eagle3", 3, None) is None   # the model not known
    pub = evidence.method_reference("eagle3", 3, None, Served("llama-3.1-8b"))
    assert pub is not None and pub.source == "published"
    user = tmp_path / "ref.json"
    user.write_text(json.dumps({"per_position": [0.9, 0.8, 0.7, 0.6]}))
    got = evidence.method_reference("eagle3", 3, user)
    assert got.source == "user" and got.per_position == (0.9, 0.8, 0.7)
    assert evidence.method_reference("draft_model", 4, None) is None
    assert evidence.method_reference("eagle3", None, user) is None


def test_the_sampled_oracle_is_computed_whenever_a_sampled_pass_was_measured(tmp_path):
    """Before the signature, not only when sampled falls below greedy: a verifier that accepts
    every draft leaves sampled equal to greedy, and only the sampled oracle shows it."""
    notes: list[str] = []
    ctx = _ctx(tmp_path)
    ctx.measured.sampled = object()
    ctx.sampling = (1.0, 0.95)
    assert orchestrator._early(ctx, "oracle-sampled", notes) is None   # no greedy oracle here
    assert len(notes) == 1 and "compared with greedy only" in notes[0]
    # its phase is the catalogue's: before the signature, so the plan does not run it again
    assert C.load().experiments["oracle-sampled"].phase == "before-signature"
    assert "oracle-sampled" in orchestrator.RUN_EARLY


def test_the_signature_reads_the_sampled_oracle_gap_the_early_run_left(tmp_path):
    from types import SimpleNamespace

    ctx = Context(workdir=tmp_path)   # a pass as _facts reads it: its profile and its tok/s
    ctx.measured.greedy = SimpleNamespace(total=HEALTHY, output_tok_s=None)
    ctx.measured.sampled = SimpleNamespace(total=HEALTHY, output_tok_s=None)
    ctx.oracle_sampled_gap = Gap(measured=4.0, oracle=3.1, low=-1.1, high=-0.7)
    opts = orchestrator.Options(workdir=tmp_path, sampled=(1.0, 0.95))
    facts = evidence.facts(ctx, opts, None)
    assert facts.sampled_gap is ctx.oracle_sampled_gap
    assert "sampling-bound" in classify(facts).classes
