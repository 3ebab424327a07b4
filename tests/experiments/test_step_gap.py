"""Accepted per decode step for a drafter that does not draft at every step, on the counts
real vLLM recorded beside each other (benchmarks/results/clinic_measured.json, written by
benchmarks/clinic/measure.py: 16 code prompts x 64 tokens, greedy, prompt lookup k=3):
``healthy-ngram`` stands in for the oracle (greedy: the same text, drafted where the lookup
finds a match), and the engines that drop the lookup's drafts on some steps are measured
against it. Their drafts are accepted as often (per draft they even read higher), so only the
per-step comparison sees the loss, and the signature then reads it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.experiments.oracle_gap import STEP_UNIT, step_gap

MEASURED = Path(__file__).parents[2] / "benchmarks" / "results" / "clinic_measured.json"


def _requests(case: str) -> list[dict]:
    rows = [r for r in json.loads(MEASURED.read_text())["rows"]
            if r.get("case") == case and (r.get("modes") or {}).get("greedy")]
    assert rows, case
    return rows[-1]["modes"]["greedy"]["per_request"]


def _measured(case: str) -> SimpleNamespace:
    return SimpleNamespace(requests=[SimpleNamespace(
        completion_tokens=r["completion_tokens"],
        profile=AcceptanceProfile(drafts=r["drafts"], draft_tokens=r["draft_tokens"],
                                  accepted_tokens=r["accepted_tokens"]))
        for r in _requests(case)])


def _as_oracle(case: str) -> SimpleNamespace:
    return SimpleNamespace(traces=[SimpleNamespace(
        steps=[SimpleNamespace(accepted=r["accepted_tokens"])],
        output_ids=[0] * r["completion_tokens"]) for r in _requests(case)])


@pytest.mark.parametrize("case", ["up-ngram-skip-alternate", "up-ngram-skip-third"])
def test_an_engine_that_drafts_less_often_is_below_per_step_not_per_draft(case):
    g = step_gap(_as_oracle("healthy-ngram"), _measured(case))
    assert g is not None and g.unit == STEP_UNIT
    assert g.below and g.low > 0 and g.oracle > g.measured
    m = _measured(case).requests
    h = _measured("healthy-ngram").requests
    per_draft = (sum(r.profile.accepted_tokens for r in m) / sum(r.profile.drafts for r in m),
                 sum(r.profile.accepted_tokens for r in h) / sum(r.profile.drafts for r in h))
    assert per_draft[0] >= per_draft[1]    # per draft the loss does not show


def test_the_same_engine_is_not_below_itself_and_unknown_counts_give_no_gap():
    same = step_gap(_as_oracle("healthy-ngram"), _measured("healthy-ngram"))
    assert same is not None and not same.below and same.low == same.high == 0.0
    blind = _measured("healthy-ngram")
    blind.requests[0].profile = None
    assert step_gap(_as_oracle("healthy-ngram"), blind) is None


def test_the_signature_reads_a_loss_per_step_under_healthy_acceptance_per_draft():
    from specdoctor.diagnose.references import Reference
    from specdoctor.diagnose.signature import Facts, classify

    rates = (0.75, 0.6346, 0.5692)   # healthy-ngram's, as the oracle would give them
    profile = AcceptanceProfile(400, 1200, 780, (300, 254, 226), 3)
    ref = Reference("oracle", "oracle", rates, tolerance=0.05)
    healthy = classify(Facts(profile, ref, method="ngram", k=3))
    assert healthy.cls == "healthy"
    g = step_gap(_as_oracle("healthy-ngram"), _measured("up-ngram-skip-third"))
    sig = classify(Facts(profile, ref, method="ngram", k=3, step_gap=g))
    assert sig.cls == "uniform-low" and STEP_UNIT in sig.evidence
    # a draft model drafts at every step: the per-step figure changes nothing for it
    assert classify(Facts(profile, ref, method="draft_model", k=3, step_gap=g)).cls == \
        classify(Facts(profile, ref, method="draft_model", k=3)).cls


def test_the_replays_drafting_loss_is_stated_in_the_per_step_gaps_unit():
    """up-ngram-skip-alternate at ea9d1c7 (benchmarks/results/clinic.json): the replay sized
    the drafting loss +0.409 [+0.294, +0.524] per step of the engine, against a per-step gap of
    0.269 (0.547 against the oracle's 0.816, 95% [0.195, 0.396]): 152% of the gap. In the
    gap's unit the drafting loss is the per-step gap, times drafting's share of what the replay
    saw; a gap per draft, or a finding on verification, is left as found."""
    from dataclasses import replace

    from specdoctor.experiments.replay.decide import in_gap_units
    from specdoctor.verdict import rules, sizing
    from specdoctor.verdict.findings import Finding, Verdict
    from specdoctor.verdict.sizing import Size

    g = rules.Gap(0.5473, 0.8164, 0.1949, 0.3955, unit=STEP_UNIT)
    replayed = Finding("engine-drafting", Verdict.CONFIRMED, "e", recovered=1.0, basis="replay",
                       size=Size(0.4093, 0.2944, 0.5241, sizing.GREEDY, "replay"))
    asked = sizing.asked(g.measured, g.oracle, (), g.low, g.high, unit=STEP_UNIT)
    assert sizing.share_of(replayed.size, asked) == pytest.approx(1.52, abs=0.01)
    [f] = in_gap_units([replayed], g)
    assert f.size.loss == pytest.approx(0.2691)
    assert (f.size.low, f.size.high) == (pytest.approx(0.1949), pytest.approx(0.3955))
    assert sizing.share_of(f.size, asked) == pytest.approx(1.0)
    assert "+0.409 per step of the engine" in f.size.how
    [part] = in_gap_units([replace(replayed, recovered=0.6)], g)
    assert part.size.loss == pytest.approx(0.6 * 0.2691)
    verifier = replace(replayed, hypothesis="rejection-sampler")
    per_draft = replace(g, unit=sizing.PER_DRAFT)
    assert in_gap_units([verifier], g) == [verifier]
    assert in_gap_units([replayed], per_draft) == [replayed]
    assert in_gap_units([replayed], None) == [replayed]
