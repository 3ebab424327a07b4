"""A root cause confirmed by a verdict patch: the report says how it was reached, cites the
upstream report and prints the fix and the stop-gap command."""

from __future__ import annotations

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import ledger as L
from specdoctor.diagnose.orchestrator import Diagnosis
from specdoctor.diagnose.report import markdown
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.packs import verdicts
from tests.diagnose.recorded import counts


def _diagnosis(confirmed: bool) -> Diagnosis:
    sig = classify(Facts(counts([1.0, 1.0, 1.0, 1.0]), None, sampled=counts([0.9, 0, 0, 0]),
                         sampled_label="T=1, top_p=0.95", method="draft_model", k=4))
    led = L.build(sig, C.load(), 2.0, also=("rejection-sampler",))
    fix = verdicts.get("cpu-sampler-fix")
    verdict = Verdict.CONFIRMED if confirmed else Verdict.INCONCLUSIVE
    led.apply(ExperimentResult("verdict-patch", [Finding(
        "rejection-sampler", verdict, "served with cpu-sampler-fix: meets its oracle",
        recovered=1.0, basis="counterfactual" if confirmed else None)],
        {"cpu-sampler-fix": {"patch": fix.to_json(), "stop_gap": verdicts.serve_hint(fix, None)}}))
    root, others = led.root_cause()
    return Diagnosis(sig, led, root, others)


def test_the_report_cites_upstream_and_prints_the_fix():
    d = _diagnosis(True)
    assert d.root_cause == "rejection-sampler" and d.root_cause_basis == "counterfactual"
    assert d.to_json()["root_cause_basis"] == "counterfactual"
    md = markdown(d, "S")
    assert "Reached by counterfactual (verdict-patch): [verdict-patch] confirmed" in md
    assert "vllm-project/vllm issue #55005" in md and "vllm-project/vllm PR #55006" in md
    assert "`specdoctor probe run cpu-sampler-fix -- <your server command>" in md


def test_no_fix_is_printed_for_a_patch_that_did_not_recover():
    d = _diagnosis(False)   # the patch applied, was served, and changed nothing
    assert d.root_cause is None and "### Fix" not in markdown(d, "S")
    # the replay then localised it to verification: the cause stands, by replay, with no fix
    d.ledger.apply(ExperimentResult("replay", [Finding(
        "rejection-sampler", Verdict.CONFIRMED, "accept decisions differ", basis="replay")]))
    d.root_cause, d.other_causes = d.ledger.root_cause()
    md = markdown(d, "S")
    assert d.root_cause_basis == "replay" and "Reached by replay (replay)" in md
    assert "### Fix" not in md and "#55005" not in md
