"""Signature ``zero``: position 0 under 0.05 from a trained drafter is zero (not steep-decay),
and zero excludes draft-quality — a trained drafter that agrees with its target 0.3% of the time
is broken, not weak. Prompt lookup is not a trained drafter: its low position 0 stays a shape."""

from __future__ import annotations

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import ledger as L
from specdoctor.diagnose.references import Reference
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.verdict import rules
from specdoctor.verdict.findings import ExperimentResult, Verdict
from tests.diagnose.recorded import counts

# The case: 0.003/0/0 accepted per position, equal to its oracle.
BROKEN = [0.003, 0.0, 0.0]


def _oracle(per: list[float]) -> Reference:
    return Reference("oracle", "oracle", tuple(per), tolerance=0.05)


def test_a_trained_drafter_that_almost_never_agrees_is_zero_for_every_trained_method():
    for method in ("draft_model", "eagle3", "mtp", "dflash", "deepseek_mtp"):
        sig = classify(Facts(counts(BROKEN), _oracle(BROKEN), method=method, k=3))
        assert sig.cls == "zero", (method, sig)
        assert "broken, not weak" in sig.evidence and "0.003" in sig.evidence
    # from a total alone (no per-position counts): accepted per draft under 0.05 is zero too
    sig = classify(Facts(counts(BROKEN).__class__(1000, 3000, 3, None, 3), None,
                         method="eagle3", k=3))
    assert sig.cls == "zero", sig


def test_prompt_lookup_with_a_low_first_position_is_not_zero():
    sig = classify(Facts(counts(BROKEN), _oracle(BROKEN), method="ngram", k=3))
    assert sig.cls != "zero"
    # nor is a trained drafter just above the line
    ok = [0.06, 0.01, 0.0]
    assert classify(Facts(counts(ok), _oracle(ok), method="eagle3", k=3)).cls != "zero"


def test_zero_leaves_draft_quality_out_and_the_answer_is_not_determined():
    sig = classify(Facts(counts(BROKEN), _oracle(BROKEN), method="eagle3", k=3))
    led = L.build(sig, C.load(), 2.0, also=(*rules.FILE_SIDE, "k-beyond-training"))
    assert led.entry("draft-quality") is None
    # the oracle says the engine reaches it, and its rule agrees: not weak, broken
    gap = rules.Gap(0.003, 0.003, -0.001, 0.001)
    found = rules.decide_oracle(gap, 0.003, file_side_excluded=True, trained=True)
    dq = next(f for f in found if f.hypothesis == "draft-quality")
    assert dq.verdict is Verdict.EXCLUDED and dq.basis == "comparison"
    led.apply(ExperimentResult("oracle-greedy", found))
    a = led.answer()
    assert a.root is None and "draft-config-mismatch" in a.undetermined["candidates"]
    assert "draft-quality" not in a.undetermined["candidates"]


def test_without_the_method_the_rule_is_not_applied():
    # (an interval inside 5% of the oracle: the elimination needs the gap bounded)
    found = rules.decide_oracle(rules.Gap(0.003, 0.003, -0.0001, 0.0001), 0.003, True)
    assert next(f for f in found if f.hypothesis == "draft-quality").verdict \
        is Verdict.CONFIRMED


def test_prompt_lookup_that_accepts_nothing_may_be_weak():
    from specdoctor.diagnose.settle import weak_lookup

    nothing = counts([0.0, 0.0, 0.0])
    lookup = Facts(nothing, None, method="ngram", k=3)
    sig = classify(lookup)
    assert sig.cls == "zero" and weak_lookup(sig, lookup) == ("draft-quality",)
    trained = Facts(nothing, None, method="eagle3", k=3)
    assert weak_lookup(classify(trained), trained) == ()


def test_too_few_drafts_to_tell_is_what_a_longer_measurement_settles():
    from pathlib import Path

    from specdoctor.diagnose import evidence
    from specdoctor.diagnose.signature import too_few_to_tell
    from specdoctor.diagnose.target import Options
    from specdoctor.experiments.base import Context

    # clinic, up-ngram-sampled-twice at 45e337e: 9 drafts, none accepted, from 8 requests of
    # 48 tokens: undetermined, and too few to tell
    few = counts([0.0, 0.0, 0.0], drafts=9)
    assert classify(Facts(few, None, method="ngram", k=3)).cls == "undetermined"
    assert too_few_to_tell(few)
    # 36 drafts none accepted is zero, some accepted is a rate, none drafted is no data
    assert classify(Facts(counts([0.0, 0.0, 0.0], drafts=36), None, method="ngram",
                          k=3)).cls == "zero"
    assert not too_few_to_tell(counts([0.0, 0.0, 0.0], drafts=36))
    assert not too_few_to_tell(counts([0.2, 0.0, 0.0], drafts=9))
    assert not too_few_to_tell(counts([0.0, 0.0, 0.0], drafts=0)) and not too_few_to_tell(None)
    # without a live server there is nothing to measure again, and the request length stays
    ctx = Context(workdir=Path("."), max_tokens=48)
    notes: list[str] = []
    assert not evidence.measure_longer(ctx, Options(), notes)
    assert ctx.max_tokens == 48 and not notes
