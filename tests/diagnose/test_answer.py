"""How the diagnosis answers: every confirmed cause has its basis, an answer by elimination
stands only when every rival the numbers allow was excluded, and otherwise the answer is
"not determined" with the candidates that remain, in the JSON and in every text."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import ledger as L
from specdoctor.diagnose.orchestrator import Diagnosis
from specdoctor.diagnose.settle import draft_quality
from specdoctor.diagnose.references import Reference
from specdoctor.diagnose.report import answer_words, html_page, markdown
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.verdict import rules
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from tests.diagnose.recorded import counts

# A weak drafter that the engine serves as well as its weights allow: low, equal to the oracle.
WEAK = [0.30, 0.12, 0.05, 0.02]


def _weak_ledger() -> L.Ledger:
    oracle = Reference("oracle", "oracle", tuple(WEAK), tolerance=0.05)
    sig = classify(Facts(counts(WEAK), oracle, method="draft_model", k=4))
    assert sig.cls in ("steep-decay", "uniform-low"), sig
    led = L.build(sig, C.load(), 2.0, also=(*rules.FILE_SIDE, "k-beyond-training"))
    gap = rules.Gap(sum(WEAK), sum(WEAK), -0.01, 0.01)
    led.apply(ExperimentResult("oracle-greedy", rules.decide_oracle(gap, 0.30, False)))
    return led


def _exclude(led: L.Ledger, hyps: tuple[str, ...], exp: str = "oracle-counterfactual") -> None:
    led.apply(ExperimentResult(exp, [Finding(h, Verdict.EXCLUDED, "no recovery",
                                             basis="counterfactual") for h in hyps]))


def _redecide(led: L.Ledger) -> None:
    ctx = SimpleNamespace(oracle_gap=rules.Gap(0.49, 0.49, -0.01, 0.01), oracle_pos0=0.30,
                          oracle_below_method=False, method=None, method_reference=None, k=4)
    draft_quality(ctx, led)


def _rivals(led: L.Ledger) -> list[str]:
    return [h for h in rules.ELIMINATION_RIVALS["draft-quality"] if led.entry(h) is not None
            and led.entry(h).verdict is not Verdict.EXCLUDED]


def test_draft_quality_waits_for_every_rival_not_only_the_file_side():
    led = _weak_ledger()
    _exclude(led, rules.FILE_SIDE)
    open_ = _rivals(led)
    assert "k-beyond-training" in open_
    _redecide(led)
    assert led.entry("draft-quality").verdict is Verdict.INCONCLUSIVE
    a = led.answer()
    assert a.root is None
    assert set(open_) <= set(a.undetermined["candidates"])
    assert "draft-quality" in a.undetermined["candidates"]
    assert "k-beyond-training" in a.undetermined["why"]
    # once every rival is excluded by an experiment that ran: named, by elimination
    _exclude(led, tuple(open_), "trained-depth")
    _redecide(led)
    a = led.answer()
    assert a.root == "draft-quality" and a.undetermined == {"candidates": [], "why": ""}
    # sized against the room up to k (no figure for the method): 4 - 0.49 of a gap of as much
    assert led.entry("draft-quality").size.loss == pytest.approx(4 - 0.49)
    assert led.entry("draft-quality").basis == "elimination"


def test_an_elimination_answer_with_a_rival_open_is_not_given():
    # whatever confirmed it: the rule holds in the answer itself, not only where it is decided
    fs = [Finding("draft-quality", Verdict.CONFIRMED, "weak", recovered=0.0, basis="elimination"),
          Finding("tokenizer-mismatch", Verdict.INCONCLUSIVE, "not run: no launch command"),
          Finding("rope-sync", Verdict.EXCLUDED, "equal to the oracle")]
    a = rules.answer(fs, needs_cause=True)
    assert a.root is None
    assert a.undetermined["candidates"] == ["tokenizer-mismatch", "draft-quality"]
    assert "not run: no launch command" in a.undetermined["why"]
    fs[1] = Finding("tokenizer-mismatch", Verdict.EXCLUDED, "ids agree")
    assert rules.answer(fs, needs_cause=True).root == "draft-quality"
    # a rival confirmed later (with no share recovered to rank it by) is the answer instead
    fs[2] = Finding("rope-sync", Verdict.CONFIRMED, "probe: rope differs", basis="comparison")
    a = rules.answer(fs, needs_cause=True)
    assert (a.root, a.undetermined["candidates"]) == ("rope-sync", [])


def test_a_confirmed_cause_of_another_basis_is_named_whatever_is_open():
    fs = [Finding("rope-sync", Verdict.CONFIRMED, "probe", recovered=0.8, basis="comparison"),
          Finding("kernel-numerics", Verdict.PENDING, "not run")]
    a = rules.answer(fs, needs_cause=True)
    assert (a.root, a.undetermined) == ("rope-sync", {"candidates": [], "why": ""})


def test_no_cause_where_one_is_needed_lists_what_remains():
    fs = [Finding("rope-sync", Verdict.EXCLUDED, "equal"),
          Finding("kernel-numerics", Verdict.INCONCLUSIVE, "the kernel has no adapter"),
          Finding("taps", Verdict.PENDING, "not run: over the budget")]
    a = rules.answer(fs, needs_cause=True)
    assert a.root is None and a.undetermined["candidates"] == ["kernel-numerics", "taps"]
    assert "over the budget" in a.undetermined["why"]
    every = rules.answer([fs[0]], needs_cause=True)
    assert every.undetermined["candidates"] == [] and "every candidate was excluded" in \
        every.undetermined["why"]
    # a healthy symptom needs no cause: nothing undetermined
    assert rules.answer(fs, needs_cause=False).undetermined == {"candidates": [], "why": ""}


def test_every_experiment_confirms_with_a_basis():
    cat = C.load()
    assert all(cat.confirms_by(e) in ("counterfactual", "replay", "comparison")
               for e in cat.experiments)
    assert cat.confirms_by("rule:oracle-equal-low") == "elimination"
    led = _weak_ledger()
    # a finding that does not say its basis takes its experiment's
    led.apply(ExperimentResult("compile-cache-ab", [Finding(
        "compile-cache-pollution", Verdict.CONFIRMED, "fresh cache recovers", recovered=0.9)]))
    assert led.entry("compile-cache-pollution").basis == "counterfactual"
    assert rules.decide_counterfactual("draft-config-mismatch", "rope", 0.4, 3.9, 4.0,
                                       True).basis == "counterfactual"


def test_the_texts_say_not_determined_with_the_candidates_and_why():
    led = _weak_ledger()
    _exclude(led, rules.FILE_SIDE)
    a = led.answer()
    d = Diagnosis(led.signature, led, a.root, a.others, undetermined=a.undetermined)
    j = d.to_json()
    assert j["root_cause"] is None and j["root_cause_basis"] is None
    assert j["undetermined"]["candidates"] == a.undetermined["candidates"]
    md = markdown(d, "serve x")
    assert "not determined: these remain: " + ", ".join(a.undetermined["candidates"]) in md
    assert "why: no experiment confirmed a cause, and these were not excluded" in md
    assert "not determined: these remain" in html_page(d, "serve x")
    assert answer_words("rope-sync", "comparison", None, "cliff") == [
        "rope-sync (basis: comparison)"]
    assert answer_words(None, None, {"candidates": [], "why": ""}, "healthy") == ["none: healthy"]


def test_not_determined_names_the_fields_an_experiment_could_not_check():
    # the contract's counterfactual left draft-config-mismatch open: two keys no reference
    # could check; draft-quality, by elimination, waits for it
    open_ = Finding("draft-config-mismatch", Verdict.INCONCLUSIVE, "not checked (no reference)",
                    unchecked=("foo_scale = 3: no reference", "bar_ids (the other layer sets)"))
    fs = [Finding("draft-quality", Verdict.CONFIRMED, "weak", recovered=0.0, basis="elimination"),
          open_]
    a = rules.answer(fs, needs_cause=True)
    assert a.root is None and a.undetermined["candidates"] == ["draft-config-mismatch",
                                                                "draft-quality"]
    assert ("not checked: foo_scale = 3: no reference, bar_ids (the other layer sets)"
            in a.undetermined["why"])


def test_a_layer_search_left_open_keeps_the_weak_drafter_from_being_named():
    # the search's best set neither shown nor ruled out on its held-out half: draft-quality is
    # not reached by elimination; the answer is not determined and names the set left open
    led = _weak_ledger()
    _exclude(led, tuple(h for h in rules.ELIMINATION_RIVALS["draft-quality"]
                        if h != "draft-config-mismatch"))
    led.apply(ExperimentResult("oracle-counterfactual", [Finding(
        "draft-config-mismatch", Verdict.INCONCLUSIVE,
        "dflash_config.target_layer_ids: searched 27 sets; the best set is not decided on the "
        "held-out half", unchecked=("dflash_config.target_layer_ids = [0, 1] (the search's "
                                    "best, not decided)",))]))
    _redecide(led)
    assert led.entry("draft-quality").verdict is Verdict.INCONCLUSIVE
    a = led.answer()
    assert a.root is None
    assert {"draft-config-mismatch", "draft-quality"} <= set(a.undetermined["candidates"])
    assert "target_layer_ids = [0, 1]" in a.undetermined["why"]


def test_the_why_of_an_open_candidate_is_cut_at_a_word_never_inside_one():
    from specdoctor.verdict.rules import clip

    text = "replayed " * 30   # 9 characters a word: the 200th is inside one
    out = clip(text)
    assert len(out) <= 200 and out.endswith("…")
    assert text.startswith(out[:-1]) and text[len(out) - 1] == " "
    assert clip("short why") == "short why"
