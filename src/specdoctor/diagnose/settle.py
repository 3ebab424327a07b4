"""The verdict rules a diagnosis applies to its ledger as it goes, in one place.

Which causes stay candidates whatever the signature (``kept_candidates``, ``weak_lookup``), the
gap each pass asks a cause to explain (``gaps``), draft-quality's answer by elimination
(``draft_quality``: rules oracle-equal-low, elimination-needs-all), the hold on a replay's
drafting verdict while the contract names a lead (``held_by_contract``, ``say_held``: rule
drafting-not-config), the plan's stop (``close_explained``), the drafting loss restated beside
a counterfactual (``restate_drafting``: rule drafting-share) and the final signature stated
against a recovered curve (``against_recovery``). The rules' texts are in the catalogue; the
decisions themselves are ``specdoctor.verdict.rules``.
"""

from __future__ import annotations

from dataclasses import replace

from specdoctor.diagnose import references
from specdoctor.diagnose.ledger import Ledger
from specdoctor.diagnose.signature import Facts, Signature, classify
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.experiments.replay.decide import drafting_losses
from specdoctor.verdict import rules, sizing
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict


def weak_lookup(sig: Signature, facts: Facts) -> tuple[str, ...]:
    """``zero`` leaves draft-quality out because a trained drafter that never agrees is broken
    (rule zero-not-weak); a drafter that is not trained (prompt lookup) that finds nothing to
    copy is weak for these prompts, so there draft-quality stays a candidate."""
    return ("draft-quality",) if sig.cls == "zero" and not facts.trained else ()


def kept_candidates(ctx: Context, facts: Facts) -> tuple[str, ...]:
    """Causes to keep as candidates whatever the signature.

    The oracle runs the served setup as configured (the drafter's files, its k): matching it
    clears the engine, not the setup, so those causes stay candidates whenever it is the
    reference. With no reference at all, the file-side counterfactuals (which need none) are
    the way to a verdict. An engine that is not significantly off its greedy oracle but not
    shown within 5% of it either may lose acceptance inside the interval however the symptom
    reads, so the replay's leads stay candidates (``rules.replay_leads_open``)."""
    oracle = facts.reference is not None and facts.reference.source == "oracle"
    kept: tuple[str, ...] = ()
    if ctx.draft_dir is not None and (facts.reference is None or oracle):
        kept += rules.FILE_SIDE
    if oracle:
        kept += tuple(h for h in rules.ORACLE_SHARED if h not in rules.FILE_SIDE)
    if rules.replay_leads_open(ctx.oracle_gap):
        kept += rules.REPLAY_LEADS
    return kept


def gaps(ctx: Context, ledger: Ledger) -> None:
    """The gap each pass asks a cause to explain (rule cause-sized): the greedy and the
    sampled measurement against their oracles, where computed."""
    ledger.gaps = {k: g for k, g in (("greedy", ctx.oracle_gap),
                                     ("sampled", ctx.oracle_sampled_gap)) if g is not None}


def draft_quality(ctx: Context, ledger: Ledger) -> None:
    """draft-quality waits for the file-side counterfactuals (rule oracle-equal-low) and is
    confirmed, by elimination, only once every rival the ledger holds was excluded (rule
    elimination-needs-all: ``rules.ELIMINATION_RIVALS``)."""
    gap = ctx.oracle_gap
    e = ledger.entry("draft-quality")
    if gap is None or e is None or e.verdict is not Verdict.INCONCLUSIVE:
        return
    side = [ledger.entry(h) for h in rules.FILE_SIDE]
    rivals = [ledger.entry(h) for h in rules.ELIMINATION_RIVALS["draft-quality"]]
    excluded = all(x is None or x.verdict is Verdict.EXCLUDED for x in rivals)
    confirmed_other = any(x is not None and x.verdict is Verdict.CONFIRMED for x in side)
    if confirmed_other:
        ledger.apply(ExperimentResult("rule:oracle-equal-low", [Finding(
            "draft-quality", Verdict.EXCLUDED,
            "a counterfactual on the served files recovered acceptance: the drafter is not "
            "weak, its files are wrong")]))
        return
    if excluded:
        found = rules.decide_oracle(gap, ctx.oracle_pos0, file_side_excluded=True,
                                    reference_low=ctx.oracle_below_method,
                                    trained=rules.trained_drafter(ctx.method))
        ledger.apply(ExperimentResult("rule:oracle-equal-low", [
            weak_sized(f, gap.measured, ctx.method_reference, ctx.k) for f in found]))


def weak_sized(f: Finding, measured: float, reference: tuple[str, float] | None,
               k: int | None = None) -> Finding:
    """A weak drafter confirmed, sized against what its method reaches at this k (``reference``:
    the published figure or the user's, ``ctx.method_reference``): the engine meets the oracle
    of these weights, so the whole shortfall from that figure is the drafter's. With no figure,
    against the room up to ``k`` (every draft token accepted), and the size says so: it is the
    drafter's whole shortfall, not what a healthy drafter of its kind would recover. Unsized
    where neither is known or the drafter is not below it (pure)."""
    if f.hypothesis != "draft-quality" or f.verdict is not Verdict.CONFIRMED:
        return f
    if reference is None and k:
        reference = (f"the room up to k={k} (no published figure or --reference for this "
                     f"method at this k: how much of it a healthy drafter would recover is not "
                     f"known)", float(k))
    if reference is None or reference[1] <= measured:
        return f
    name, ref = reference
    return replace(f, size=sizing.shortfall(
        measured, ref, name, f"against {name}: the engine meets the oracle of these weights, "
                             f"so the shortfall from {ref:.3f} is the drafter's"))


def held_by_contract(ctx: Context, ledger: Ledger) -> tuple[str, ...]:
    """Rule drafting-not-config (``rules.held_by_contract``): the causes a replay's drafting
    verdict must not close while the drafter's contract names a lead for them, with the value
    to set, that no relaunch has checked."""
    relaunched = any(r.experiment == "relaunch-counterfactual" for r in ledger.results)
    findings = ledger.findings()
    if not rules.held_by_contract(findings, rules.CONTRACT_CAUSES, relaunched):
        return ()   # nothing could be held: the contract is not read
    from specdoctor.experiments.counterfactual import review_for

    # a lead with a reference value (a search over every fitting value names none to set)
    named = {x.hypothesis for x in review_for(ctx).leads if not x.search}
    return rules.held_by_contract(findings, named, relaunched)


def say_held(ctx: Context, ledger: Ledger, held: tuple[str, ...]) -> None:
    ctx.progress("the drafting difference is confirmed, but the drafter's contract names a "
                 f"lead not checked yet: relaunching for {', '.join(held)} first")
    ledger.apply(ExperimentResult("rule:drafting-not-config", [Finding(
        h, Verdict.PENDING, "the replay found the engine's drafts differ from the drafter's "
        "chain on the served files; the drafter's contract names a lead on a served field for "
        "this cause, which a relaunch with the field set to its reference decides before the "
        "drafting difference is taken as the engine's") for h in held]))


def close_explained(ctx: Context, ledger: Ledger) -> None:
    """The plan stops: every symptom has a confirmed cause; what was not run says so."""
    root, _ = ledger.root_cause()
    ctx.progress("every symptom has a confirmed cause: stopping")
    for e in ledger.entries:
        if e.verdict is Verdict.PENDING and not e.evidence:
            e.evidence.append(f"not run: every symptom already has a confirmed cause "
                              f"({root})")


def restate_drafting(ctx: Context, ledger: Ledger) -> None:
    """A drafting difference found by the replay and a cause confirmed by a counterfactual:
    the replay's share is of what the replay saw off a correct engine, the counterfactual's of
    the room up to k. The drafting loss is restated in the counterfactual's unit (accepted per
    step, as a share of the room above the measured acceptance: ``rules.drafting_share``) so
    that ``root_cause`` orders the two by what each costs."""
    e = ledger.entry("engine-drafting")
    if e is None or e.verdict is not Verdict.CONFIRMED or e.basis != "replay":
        return
    cfs = [x for x in ledger.entries if x.verdict is Verdict.CONFIRMED
           and x.basis == "counterfactual" and x.hypothesis != e.hypothesis]
    greedy = ctx.measured.greedy
    replay = next((r for r in reversed(ledger.results) if r.experiment == "replay"), None)
    if not cfs or greedy is None or greedy.total is None or replay is None or not ctx.k:
        return
    losses = drafting_losses(replay.numbers)
    if not losses:
        return
    loss, before = max(losses), common.apd(greedy.total)
    e.recovered = share = rules.drafting_share(loss, before, float(ctx.k))
    best = max(cfs, key=lambda x: x.recovered or 0.0)
    e.evidence.append(
        f"[rule:drafting-share] restated: the drafting loss the replay measured, {loss:.3f} "
        f"accepted per step, is {share:.0%} of the room above the measured {before:.3f} up to "
        f"{ctx.k}; {best.hypothesis} recovered {best.recovered or 0.0:.0%} of it by "
        f"counterfactual. The drafting difference was measured on the served files; it was "
        f"not measured again with {best.hypothesis} fixed")


def against_recovery(sig: Signature, facts: Facts, ledger: Ledger, root: str | None,
                      notes: list[str]) -> Signature:
    """When a counterfactual recovered acceptance, the recovered curve is what the served setup
    should give: the final signature is stated against it (the oracle of the served files
    shares their error, so against the oracle the symptom could read healthy)."""
    if root is None:
        return sig
    for r in ledger.results:
        decided = [f for f in r.findings if f.hypothesis == root and f.verdict is Verdict.CONFIRMED]
        after = [(k, v) for k, v in r.curves.items() if k.startswith("after ")]
        if decided and after:
            name, prof = max(after, key=lambda kv: common.apd(kv[1]))
            ref = references.reference_from_profile(prof, f"counterfactual {name[6:]}",
                                                    "counterfactual", tolerance=0.05)
            if ref is None:
                return sig
            final = classify(replace(facts, reference=ref))
            if final.cls != sig.cls:
                notes.append(f"signature against the served files' own oracle: {sig.cls} "
                             f"({sig.evidence})")
            return final
    # Confirmed without a recovered curve (k past the trained depth, say): the oracle ran the
    # same setup, so "healthy" against it says nothing about the cause; state the symptom
    # against the published figures for this method and k where there are some.
    if sig.cls == "healthy" and facts.reference is not None \
            and facts.reference.source == "oracle" and facts.greedy is not None:
        published = references.published_for(facts.method, facts.greedy.k)
        if published is not None:
            final = classify(replace(facts, reference=published))
            if final.cls != sig.cls:
                notes.append(f"signature against the served setup's own oracle: {sig.cls} "
                             f"({sig.evidence}); the oracle runs the same k, so it shares "
                             f"{root}")
                return final
    return sig


def decide(ctx: Context, ledger: Ledger, sig: Signature, facts: Facts,
           notes: list[str]) -> tuple[rules.Answer, Signature]:
    """The answer, decided once, when every experiment has run: the drafting loss restated
    beside a counterfactual (rule drafting-share), the gaps, the ledger's answer (rules
    root-cause, elimination-needs-all, cause-sized) and the final signature against the
    recovered curve where a counterfactual recovered."""
    restate_drafting(ctx, ledger)
    gaps(ctx, ledger)
    answer = ledger.answer()
    return answer, against_recovery(sig, facts, ledger, answer.root, notes)
