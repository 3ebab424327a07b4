"""Signature classification on profiles recorded from real lab runs and on constructed ones."""

from __future__ import annotations

from specdoctor.diagnose import references as R
from specdoctor.diagnose.references import published_for, reference_from_profile
from specdoctor.diagnose.signature import Facts, classify, find_cliff, shape
from specdoctor.verdict.rules import Gap
from tests.diagnose.recorded import counts, mean_only, measure_fixture, profile, tok_s

# What the published figures used here were measured on (references.Published).
LLAMA, QWEN, MTP8 = (R.Served("llama-3.1-8b"), R.Served("qwen3-8b"),
                     R.Served(drafter_layers=8))


def oracle_ref(case: str):
    return reference_from_profile(profile(case, "offline"), "oracle", "oracle")


def test_healthy_drafters_match_their_oracle():
    for case in ("healthy:eagle3", "healthy:dflash", "healthy:mtp", "dflash-causal"):
        sig = classify(Facts(profile(case), oracle_ref(case)))
        assert sig.cls == "healthy", (case, sig.evidence)


def test_recorded_window_fault_is_a_steep_decay_against_the_healthy_drafter():
    ref = reference_from_profile(profile("healthy:dflash"), "healthy run", "user")
    sig = classify(Facts(profile("dflash-window"), ref, method="dflash"))
    assert sig.cls == "steep-decay"
    assert "pos 0 0.39, 1 0.10, 2 0.00" in sig.evidence


def test_recorded_pos0_control_is_a_cliff_at_position_1():
    ref = reference_from_profile(profile("control:eagle3:perfect"), "perfect", "user")
    sig = classify(Facts(profile("control:eagle3:pos0"), ref, method="eagle3"))
    assert sig.cls == "cliff" and sig.cliff_at == 1


def test_case_a_shape_is_a_cliff_for_a_fixed_length_drafter_but_never_for_ngram():
    case_a = counts([0.50, 0.25, 0.0])
    ref = mean_only(2.93, 3)
    assert classify(Facts(case_a, ref, method="dflash")).cls == "cliff"
    assert classify(Facts(case_a, ref, method="dflash")).cliff_at == 2
    sig = classify(Facts(case_a, published_for("ngram", 3), method="ngram"))
    assert sig.cls != "cliff" and sig.cliff_at is None


def test_recorded_ngram_run_is_healthy_against_its_own_oracle_and_not_a_cliff():
    p = measure_fixture("lab-ngram-k3")  # 0.70 / 0.49 / 0.39
    ref = reference_from_profile(p, "oracle", "oracle")
    assert classify(Facts(p, ref, method="ngram")).cls == "healthy"
    assert shape(p, None, variable_length=True)[0] == "unreferenced"


def test_a_decay_that_started_at_position_0_is_not_a_cliff():
    # conditional 0.3 at pos0 against a reference of 0.9: the loss is there from the start
    pp = [0.30, 0.03, 0.0]
    ref = reference_from_profile(counts([0.9, 0.8, 0.7]), "r", "user")
    assert find_cliff(pp, ref.conditional()) is None
    assert find_cliff(pp, None) == 1


def test_zero_and_crash_and_no_data():
    assert classify(Facts(profile("eagle3-d2t-off-by-one"), oracle_ref("healthy:eagle3"))).cls \
        == "zero"
    sig = classify(Facts(profile("healthy:eagle3"), oracle_ref("healthy:eagle3"),
                         errors=("EngineDeadError: Unsupported CPU attention",)))
    assert sig.cls == "crash" and sig.shape == "healthy" and "EngineDeadError" in sig.evidence
    assert classify(Facts(None)).cls == "no-data"


def test_k_far_beyond_training_decays_steeply_against_published_mtp():
    sig = classify(Facts(profile("mtp-k-beyond-training"), published_for("mtp", 6, MTP8),
                         method="mtp"))
    assert sig.cls == "steep-decay"


def test_slower_than_spec_off_despite_healthy_acceptance():
    p = profile("healthy:eagle3")
    f = Facts(p, oracle_ref("healthy:eagle3"), tok_s=tok_s("healthy:eagle3"),
              tok_s_spec_off=tok_s("healthy:eagle3") * 1.25)
    sig = classify(f)
    assert sig.cls == "slower-than-spec-off" and "0.80x the spec-off tok/s" in sig.evidence
    faster = classify(Facts(p, oracle_ref("healthy:eagle3"), tok_s=200.0, tok_s_spec_off=100.0))
    assert faster.cls == "healthy"


def test_sampling_bound_when_greedy_holds_and_sampled_falls():
    g = counts([1.0, 1.0, 1.0, 1.0])
    ref = reference_from_profile(g, "oracle", "oracle")
    sampled = counts([0.34, 0.0, 0.0, 0.0])
    assert classify(Facts(g, ref, sampled=sampled)).cls == "sampling-bound"
    # what the user sees (sampled far below greedy) stays a symptom when the sampled oracle
    # agrees: the experiments then say it is what sampling costs
    at_oracle = Gap(measured=0.34, oracle=0.33, low=-0.04, high=0.02)
    assert classify(Facts(g, ref, sampled=sampled, sampled_gap=at_oracle)).cls == \
        "sampling-bound"


def test_sampled_above_its_oracle_is_a_symptom_even_when_it_equals_greedy():
    """A rejection test that accepts every draft: sampled 4.00 per draft, as greedy, where a
    correct verifier at T=1 accepts an argmax draft only with its probability."""
    g = counts([1.0, 1.0, 1.0, 1.0])
    ref = reference_from_profile(g, "oracle", "oracle")
    above = Gap(measured=4.0, oracle=3.1, low=-1.1, high=-0.7)
    sig = classify(Facts(g, ref, sampled=g, sampled_gap=above, sampled_label="T=1, top_p=0.95"))
    assert sig.cls == "sampling-bound"
    assert "sampled above its oracle" in sig.evidence
    assert sig.numbers["sampled_oracle_accepted_per_draft"] == 3.1
    level = Gap(measured=4.0, oracle=3.98, low=-0.05, high=0.01)
    assert classify(Facts(g, ref, sampled=g, sampled_gap=level)).cls == "healthy"
    assert classify(Facts(g, ref, sampled=g)).cls == "healthy"   # no oracle: greedy only


def test_load_dependent_uses_the_intervals():
    p = profile("healthy:eagle3")   # accepted per draft 1.83, 95% [1.59, 2.08]
    ref = oracle_ref("healthy:eagle3")
    lower = profile("control:eagle3:pos0")   # 1.00, interval [1, 1]: disjoint
    assert classify(Facts(p, ref, concurrent=lower)).cls == "load-dependent"
    assert classify(Facts(p, ref, concurrent=p)).cls == "healthy"
    overlapping = profile("healthy:dflash")  # 1.29, 95% [1.02, 1.61]: overlaps eagle3's
    assert classify(Facts(p, ref, concurrent=overlapping)).cls == "healthy"


def test_a_longer_load_pass_is_compared_with_concurrency_1_at_its_own_length():
    # the c=8 pass was taken with longer requests (experiments.common.measure_loaded): its
    # comparison is the c=1 pass at that length, not the measurement's own c=1 passes
    p = profile("healthy:eagle3")
    ref = oracle_ref("healthy:eagle3")
    lower = profile("control:eagle3:pos0")
    assert classify(Facts(p, ref, concurrent=lower, concurrent_reference=lower)).cls == "healthy"
    assert "load-dependent" in classify(Facts(lower, ref, concurrent=lower, greedy_again=lower,
                                              concurrent_reference=p)).classes


def test_drifting_over_uptime():
    early = [counts([0.8, 0.6, 0.4], 50)] * 4
    late = [counts([0.4, 0.2, 0.1], 50)] * 4
    ref = reference_from_profile(counts([0.8, 0.6, 0.4]), "r", "user")
    g = counts([0.6, 0.4, 0.25])
    sig = classify(Facts(g, ref, windows=tuple(early + late)))
    assert "drifting" in sig.classes
    assert "drifting" not in classify(Facts(g, ref, windows=tuple(early + early))).classes


def test_equal_to_a_low_oracle_is_still_low():
    # recorded: a window fault, measured and predicted offline from the same files
    sig = classify(Facts(profile("dflash-window"), oracle_ref("dflash-window"), method="dflash"))
    assert sig.cls == "steep-decay" and "the oracle itself is low" in sig.evidence
    # a weak but flat drafter
    flat = counts([0.3, 0.09, 0.027])
    sig = classify(Facts(flat, reference_from_profile(flat, "oracle", "oracle")))
    assert sig.cls == "uniform-low"


# -- what the log does not pin down stays a range ------------------------------------------------

def unknown_drafts(accepted: int, draft_tokens: int, lo: int, hi: int, k: int | None = None):
    from specdoctor.acceptance.profile import AcceptanceProfile

    return AcceptanceProfile(drafts=None, draft_tokens=draft_tokens, accepted_tokens=accepted,
                             k=k, drafts_range=(lo, hi))


def test_an_unknown_draft_count_is_a_range_never_zero():
    """llama-server's older per-request line (118 accepted / 144 generated, PR 23269): any draft
    count from 1 to 144 fits it, so accepted per draft is anything from 118/144 up."""
    p = unknown_drafts(118, 144, 1, 144)
    sig = classify(Facts(p))
    assert sig.cls == "unreferenced"
    assert "between 0.82 and 118.00 accepted per draft" in sig.evidence
    assert "0.00" not in sig.evidence and "None" not in sig.evidence
    assert sig.numbers["accepted_per_draft_range"] == [round(118 / 144, 4), 118.0]


def test_a_range_is_healthy_low_or_undetermined_against_a_reference_at_its_k():
    from specdoctor.diagnose.references import Reference

    ref = Reference("r", "user", (0.6, 0.4, 0.2))     # 1.2 accepted per draft; band from 1.06
    # 120 accepted over 90 to 100 drafts: 1.20 to 1.33, all within
    assert classify(Facts(unknown_drafts(120, 300, 90, 100, k=3), ref)).cls == "healthy"
    # 60 accepted over 90 to 100 drafts: 0.60 to 0.67, all below
    low = classify(Facts(unknown_drafts(60, 300, 90, 100, k=3), ref))
    assert low.cls == "uniform-low" and "even the highest is below" in low.evidence
    # 100 accepted over 80 to 120 drafts: 0.83 to 1.25, across the band's floor
    mid = classify(Facts(unknown_drafts(100, 300, 80, 120, k=3), ref))
    assert mid.cls == "undetermined" and "between 0.83 and 1.25" in mid.evidence
    assert mid.classes == ("undetermined",)
    # the same range with the server's k unknown: a reference is for one k, not compared
    unk = classify(Facts(unknown_drafts(100, 300, 80, 120), ref))
    assert unk.cls == "unreferenced" and "k is unknown" in unk.evidence
    # k from the user where the profile has none
    assert classify(Facts(unknown_drafts(120, 300, 90, 100), ref, k=3)).cls == "healthy"


def test_zero_accepted_without_a_draft_count_says_what_was_drafted():
    from specdoctor.acceptance.profile import AcceptanceProfile

    p = AcceptanceProfile(drafts=None, draft_tokens=66, accepted_tokens=0, drafts_range=(5, 66))
    sig = classify(Facts(p))
    # as few as 5 drafts: a working drafter may have had none accepted by chance
    assert sig.cls == "undetermined" and sig.evidence.startswith("66 draft tokens")
    assert "too few" in sig.evidence and "0.52" in sig.evidence
    assert "None" not in sig.evidence
    p = AcceptanceProfile(drafts=None, draft_tokens=660, accepted_tokens=0,
                          drafts_range=(50, 660))
    sig = classify(Facts(p))
    assert sig.cls == "zero" and sig.evidence.startswith("660 draft tokens")


def sglang_windows(*lens: str, k: int | None = None):
    from specdoctor.sources.sglang import parse_log

    lines = [f"[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, "
             f"token usage: 0.13, accept len: {al}, cuda graph: True, gen throughput (token/s): "
             f"171.01, #queue-req: 0" for al in lens]
    return [w.profile for w in parse_log(lines, "s.log", k=k).windows]


def test_sglang_acceptance_lengths_say_zero_low_or_healthy():
    from specdoctor.acceptance.profile import sum_profiles

    # rates only: drafts all rejected and steps that drafted nothing both print 1.00
    zero = classify(Facts(sum_profiles(sglang_windows("1.00", "1.00", "1.00"))))
    assert zero.cls == "undetermined" and "1.00 in every window" in zero.evidence
    assert "drafted nothing" in zero.evidence
    # pr6081's windows (MTP, 8 DP ranks): 2.58 to 2.94, against the MTP figure at k=3
    ws = sglang_windows("2.90", "2.86", "2.94", "2.65", "2.58", k=3)
    total = sum_profiles(ws)
    assert total.mean_acceptance_length_range == (2.58, 2.94)
    sig = classify(Facts(total, published_for("mtp", 3, MTP8), method="mtp"))
    assert sig.cls == "healthy" and "between 1.58 and 1.94 accepted per draft" in sig.evidence
    assert "at k=3" in sig.evidence
    low = classify(Facts(sum_profiles(sglang_windows("1.20", "1.30", k=3)),
                         published_for("mtp", 3, MTP8), method="mtp"))
    assert low.cls == "uniform-low"
    # one window: its own figure
    one = classify(Facts(sum_profiles(sglang_windows("2.64", k=3)), published_for("mtp", 3, MTP8)))
    assert "1.64 accepted per draft" in one.evidence
    assert classify(Facts(sum_profiles(sglang_windows("2.64")))).cls == "unreferenced"


def test_per_position_rates_past_the_references_depth_are_said_not_compared():
    ref = published_for("eagle3", 5, LLAMA)     # states 3 positions
    sig = classify(Facts(counts([0.72, 0.5, 0.35, 0.2, 0.1]), ref, method="eagle3"))
    assert sig.cls == "healthy" and "positions 3-4 not compared" in sig.evidence


def test_a_mean_only_reference_is_compared_on_the_total():
    ref = mean_only(2.93, 3)    # AL 2.93: 1.93 accepted per draft, shape unknown
    sig = classify(Facts(counts([0.9, 0.7, 0.4]), ref, method="dflash"))
    assert sig.cls == "healthy" and "2.00 accepted per draft vs published" in sig.evidence
    low = classify(Facts(counts([0.5, 0.3, 0.1]), ref, method="dflash"))
    assert low.cls == "uniform-low" and "0.90 accepted per draft" in low.evidence


def test_speculation_off_is_said():
    sig = classify(Facts(None, speculation_off="12 decode lines without an acceptance figure"))
    assert sig.cls == "no-data" and sig.evidence.startswith("speculation is off: 12 decode")
