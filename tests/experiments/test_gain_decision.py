"""The three-way decision on a change measured against the served setup on the same prompts
(``rules.decide_gain``): the held-out half of the oracle's layer search, and the relaunch of the
set it chose. On real counts: ``fixtures/layer_search.json`` (the search of two clinic cases,
recorded by benchmarks/clinic/record_search.py).

A gain that is there but not shown on a few held-out prompts is no exclusion: only an interval
that rules out a gain of the margin excludes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specdoctor.verdict import rules
from specdoctor.verdict.findings import Finding, Verdict
from specdoctor.experiments.contract.compare import Candidate
from specdoctor.experiments.counterfactual import Lead, search
from specdoctor.oracle.heads.search import SearchResult

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "layer_search.json").read_text())
HALF_A, HALF_B = list(range(0, 8, 2)), list(range(1, 8, 2))


def _case(name: str) -> tuple[SearchResult, int, int]:
    (c,) = [c for c in FIXTURE["cases"] if c["case"] == name]
    r = SearchResult(tuple(map(tuple, c["candidates"])), np.array(c["accepted"]),
                     np.array(c["drafts"]), 0.0)
    served = c["served_index"]
    best = max(range(served), key=lambda i: (r.per_draft(i, HALF_A), -i))
    return r, best, served


def test_a_real_gain_not_shown_on_four_held_out_prompts_is_not_excluded():
    # DFlash served with its layer ids one higher: the search finds the trained set on half A
    r, best, served = _case("up-dflash-layer-ids-shifted")
    assert r.candidates[best] == (1, 2) and r.candidates[served] == (2, 3)
    g = rules.paired_gain(r.units(best, HALF_B), r.units(served, HALF_B))
    assert (round(g.before, 3), round(g.after, 3)) == (1.021, 1.218)
    f = rules.decide_gain("draft-config-mismatch", "held out", g, 3.0)
    assert f.verdict is Verdict.INCONCLUSIVE and "neither shown nor ruled out" in f.evidence
    assert g.low < 0 < g.margin() < g.high


def test_the_same_set_on_every_prompt_is_a_significant_recovery():
    r, best, served = _case("up-dflash-layer-ids-shifted")
    g = rules.paired_gain(r.units(best, range(8)), r.units(served, range(8)))
    f = rules.decide_gain("draft-config-mismatch", "relaunched", g, 3.0)
    assert f.verdict is Verdict.CONFIRMED and f.basis == "counterfactual"
    assert g.low > 0 and g.counts_significant


def test_the_right_set_beaten_by_nothing_is_excluded():
    r, best, served = _case("healthy-dflash-deep")
    g = rules.paired_gain(r.units(best, HALF_B), r.units(served, HALF_B))
    assert g.gain == 0.0 and g.high is not None and g.high < g.margin()
    assert rules.decide_gain("draft-config-mismatch", "held out", g, 3.0).verdict \
        is Verdict.EXCLUDED


def test_few_prompts_or_few_accepted_tokens_confirm_nothing():
    # every prompt up by one accepted token in 15 drafts: the same sign everywhere, but two
    # tokens in all
    before = np.array([[15.0, 0.0], [15.0, 0.0]])
    after = np.array([[15.0, 1.0], [15.0, 1.0]])
    g = rules.paired_gain(after, before)
    assert not g.counts_significant
    assert rules.decide_gain("h", "x", g, 3.0).verdict is not Verdict.CONFIRMED
    assert rules.small_sample_widening(4) > 1.5 and rules.small_sample_widening(200) < 1.01
    one = rules.paired_gain(after[:1], before[:1])
    assert one.low is None and rules.decide_gain("h", "x", one, 3.0).verdict \
        is Verdict.INCONCLUSIVE


def test_a_value_left_open_is_not_hidden_by_a_later_exclusion():
    ids = Lead("dflash_config.target_layer_ids", [1, 2], [0, 1], "draft-config-mismatch",
               "searched", alternatives=(Candidate([2, 3], "the other convention"),))

    def trial(lead: Lead, n: int):
        v = (Verdict.INCONCLUSIVE if lead.value == [0, 1] else Verdict.EXCLUDED)
        return Finding(lead.hypothesis, v, f"{lead.change()}: {v.value}"), None, {}

    (f,) = search([ids], ("draft-config-mismatch",), trial)[0]
    assert f.verdict is Verdict.INCONCLUSIVE
    assert "[0, 1]" in f.evidence and "[2, 3]" in f.evidence


def test_fresh_prompts_are_the_suites_prompts_the_diagnosis_did_not_measure(tmp_path):
    from specdoctor.bench.prompts import suite, take
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.common import fresh_prompts

    used = tuple(take("code", 8) + take("essay", 8))
    ctx = Context(workdir=tmp_path, prompts=used, suite="code,essay")
    fresh = fresh_prompts(ctx)
    assert fresh == tuple(p for p in suite("code") if p not in used)
    assert len(fresh) == len(suite("code")) - 8 and not set(fresh) & set(used)
    assert fresh_prompts(Context(workdir=tmp_path, prompts=used, suite="essay")) == ()



def test_near_the_ceiling_a_gain_is_shown_by_the_rejections_it_removes():
    # eight prompts of 16 drafts at k=4, one column per position: 60 of 64 draft tokens
    # accepted on each (3.75 per draft), then all 64 (4.00). 512 accepted against 480 is within
    # chance as counts; 0 rejected against 32 is not. Near the ceiling the margin is half the
    # room (0.125), not 5% of before (0.19)
    before = np.array([[16.0, 16.0, 16.0, 15.0, 13.0]] * 8)
    after = np.array([[16.0, 16.0, 16.0, 16.0, 16.0]] * 8)
    g = rules.paired_gain(after, before)
    assert g.counts_significant and g.margin(4.0) == 0.125 < g.margin()
    f = rules.decide_gain("h", "x", g, 4.0)
    assert f.verdict is Verdict.CONFIRMED and f.size.loss == 0.25
    # the same totals without positions (k unknown): the accepted counts alone show nothing
    flat = rules.paired_gain(np.column_stack([after[:, 0], after[:, 1:].sum(axis=1)]),
                             np.column_stack([before[:, 0], before[:, 1:].sum(axis=1)]))
    assert not flat.counts_significant
    assert rules.decide_gain("h", "x", flat, 4.0).verdict is not Verdict.CONFIRMED
    # one more accepted token per prompt (3.8125): under half the room, not a recovery
    near = rules.paired_gain(np.array([[16.0, 16.0, 16.0, 16.0, 13.0]] * 8), before)
    assert near.gain < near.margin(4.0)
    assert rules.decide_gain("h", "x", near, 4.0).verdict is not Verdict.CONFIRMED
