"""The diagnosis' JSON says how its answer was reached: ``root_cause_basis`` and
``undetermined`` (the candidates that remain and why, empty when a cause is named)."""

from __future__ import annotations

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import ledger as L
from specdoctor.diagnose.orchestrator import Diagnosis
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from tests.diagnose.recorded import counts


def _ledger() -> L.Ledger:
    sig = classify(Facts(counts([0.3, 0.1, 0.0, 0.0]), None, method="draft_model", k=4))
    # no reference: the signature alone leaves no candidate, so the served-file causes are
    # kept by hand (as when the reference is the oracle)
    return L.build(sig, C.load(), 2.0, also=("draft-config-mismatch", "rope-sync"))


def test_a_named_cause_has_its_basis_and_nothing_undetermined():
    led = _ledger()
    led.apply(ExperimentResult("oracle-counterfactual", [Finding(
        "draft-config-mismatch", Verdict.CONFIRMED, "rope fixed: 0.4 → 3.9", recovered=0.9,
        basis="counterfactual")]))
    root, others = led.root_cause()
    j = Diagnosis(led.signature, led, root, others).to_json()
    assert j["root_cause"] == "draft-config-mismatch"
    assert j["root_cause_basis"] == "counterfactual"
    assert j["undetermined"] == {"candidates": [], "why": ""}


def test_undetermined_is_written_as_given():
    led = _ledger()
    d = Diagnosis(led.signature, led, None, [],
                  undetermined={"candidates": ["rope-sync"], "why": "not checked"})
    j = d.to_json()
    assert j["root_cause"] is None and j["root_cause_basis"] is None
    assert j["undetermined"] == {"candidates": ["rope-sync"], "why": "not checked"}


def test_every_named_cause_says_what_it_explains_and_one_that_explains_too_little_is_apart():
    """Rule cause-sized through the ledger: the counterfactual's gain is the root cause's
    ``root_cause_explains``; a replay's drafting difference of 0.02 per step beside it is also
    found, with its size and why."""
    from specdoctor.verdict.rules import Gap
    from specdoctor.verdict.sizing import Size

    led = _ledger()
    led.gaps = {"greedy": Gap(0.4, 0.42, -0.05, 0.09)}
    led.apply(ExperimentResult("oracle-counterfactual", [Finding(
        "draft-config-mismatch", Verdict.CONFIRMED, "rope fixed: 0.4 → 3.9", recovered=0.9,
        basis="counterfactual", size=Size(3.5, how="counterfactual rope fixed"))]))
    led.apply(ExperimentResult("replay", [Finding(
        "rope-sync", Verdict.CONFIRMED, "drafts differ on 3 steps", recovered=0.95,
        basis="replay", size=Size(0.02, 0.005, 0.035))]))
    a = led.answer()
    j = Diagnosis(led.signature, led, a.root, a.others, also_found=a.also,
                  explains=a.explains).to_json()
    assert j["root_cause"] == "draft-config-mismatch"
    assert j["root_cause_explains"]["accepted_per_step"] == 3.5
    assert j["root_cause_explains"]["share_of_gap"] == 1.0
    assert j["other_causes"] == [] and j["other_causes_explain"] == {}
    (also,) = j["also_found"]
    assert also["cause"] == "rope-sync" and also["explains"]["accepted_per_step"] == 0.02
    assert "inside the band" in also["why"]
