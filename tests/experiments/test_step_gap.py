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
