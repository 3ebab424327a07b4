"""Symptom signature: which decidable shape of trouble one set of measurements shows.

Pure functions over AcceptanceProfiles and the facts around them (errors in the log, tok/s
against the spec-off baseline, greedy vs sampled, c=1 vs c=8, windows over uptime, a
reference — preferably the oracle). The result is one class with its evidence in numbers
("pos0 0.50, pos2 0.00, no error, 0.8x the spec-off tok/s") and the other classes that apply.

Classes:
- ``crash``: errors in the log (the server or a request failed);
- ``zero``: drafts proposed, none accepted; or, from a trained drafter (a draft model or head:
  ``rules.TRAINED_DRAFTERS``, not prompt lookup), position 0 under ``ZERO_POS0`` (0.05) — a
  drafter trained on its target that agrees with it this rarely is broken, not weak, so
  draft-quality does not explain ``zero`` (the catalogue). Only when enough drafts were seen:
  position 0's 95% interval (Clopper-Pearson) under ``ZERO_MAX_HIGH`` (0.25; with nothing
  accepted, 13 drafts or more); with fewer, a working drafter could have drawn as little by
  chance, and nothing accepted is ``undetermined``, saying how few;
- ``cliff``: a position j >= 1 whose conditional rate (j given j-1) falls to near zero while
  the positions before it hold up — Case A's pos0 0.50, pos2 0.00. Never called for drafters
  that propose variable-length drafts (ngram): their later positions count short drafts in the
  denominator, so a falling tail is how they count, not a cliff;
- ``steep-decay``: below the reference, and the loss grows with the position (the ratio to the
  reference at the last position is under half of that at position 0);
- ``uniform-low``: below the reference by about the same factor at every position;
- ``sampling-bound``: greedy holds up, and the sampled measurement falls well below greedy
  (under ``SAMPLED_SHARE`` of it: what the user sees) or is significantly off its sampled oracle
  in either direction (``Facts.sampled_gap``: a verifier that accepts more than a correct one
  does is as broken as one that accepts less);
- ``load-dependent``: concurrency 8 accepts differently from concurrency 1 (outside both
  intervals);
- ``drifting``: acceptance falls over the server's uptime (first vs last third of the windows),
  or the same prompts measured again on the same server accept significantly less
  (``rules.repeat_fell``);
- ``slower-than-spec-off``: acceptance within the reference, yet fewer tok/s than speculation
  off;
- ``healthy``: within the reference's tolerance at every compared position;
- ``undetermined``: the measurement is a range (a draft count the log does not print, rate-only
  windows) that reaches both into the reference's band and below it: the log allows healthy and
  low alike, so neither is said;
- ``unreferenced``: nothing to compare with and no cliff (state the numbers, decide nothing);
- ``no-data``: no draft was counted, nor any acceptance length printed (or speculation is off);
  a log that counts 0 draft tokens drafted nothing (speculation not running, e.g. above a batch
  size), which is said apart from drafts all rejected. Lines that print only rates (SGLang's
  accept len 1.00) do not tell the two apart: nothing accepted there is ``undetermined``.

Sample size: under ``FEW_DRAFTS`` (30) verify steps, the evidence of any class says how few,
with position 0's 95% interval.

What the measurement does not pin down stays a range: accepted per draft is compared by its
lowest and highest values (``apd_bounds``), never by a count the source did not give. A
reference is compared at the k of the measurement: on the positions both state, and on the
total only when both are for the same k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdoctor.acceptance.compare import conditional_from_unconditional, differs, drift
from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.diagnose.references import Reference
from specdoctor.verdict import findings
from specdoctor.verdict.rules import (
    LOAD_SHARE,
    SLOWER_SHARE,
    ZERO_POS0,
    Gap,
    RepeatFall,
    repeat_fell,
    trained_drafter,
)
from specdoctor.methods import LOOKUP_METHODS
from specdoctor.oracle.compare import WEAK_DRAFTER_POS0

CLASSES = findings.CLASSES

# A conditional rate below this, after a position accepted at least CLIFF_MIN_BEFORE, is a
# cliff (Case A: 0.25 at pos1, then ~0 at pos2).
CLIFF_CONDITIONAL = 0.15
CLIFF_MIN_BEFORE = 0.20
# Steep decay: the ratio to the reference at the last position under this share of position 0's.
DECAY_RATIO = 0.5
ABS_SLACK = 0.02          # absolute slack on top of a reference's relative tolerance
SAMPLED_SHARE = 0.7       # sampled accepted/draft under this share of greedy's
DRIFT_SHARE = 0.20        # last third of windows this much below the first third
# LOAD_SHARE and SLOWER_SHARE are shared with the experiments that decide the same question
# (concurrency-ab, spec-off-baseline): they live in verdict.rules; WEAK_DRAFTER_POS0 (an
# oracle that is itself low) is the oracle's.
# A mean acceptance length printed as 1.00 (2 decimals): under this many accepted per step.
PRINTED_ZERO = 0.005
# Fewer verify steps (drafts) than this: the evidence says how few, with the 95% interval of
# position 0 (Clopper-Pearson), whatever the class.
FEW_DRAFTS = 30
# Nothing accepted is "zero" (a broken drafter) only when position 0's 95% interval stays under
# this: a drafter that agrees with its target on a quarter of its first tokens works, however
# weakly, and with fewer drafts (under 13 with nothing accepted) it could have drawn none by
# chance.
ZERO_MAX_HIGH = 0.25
# The most draft tokens one step carries (diagnose --k allows 64): the fewest drafts that a
# count of draft tokens can be, where the draft count is not printed.
MAX_K = 64


@dataclass(frozen=True)
class Facts:
    """Everything measured about one setup, before any experiment."""

    greedy: AcceptanceProfile | None
    reference: Reference | None = None
    sampled: AcceptanceProfile | None = None
    # the sampled measurement against the sampled oracle (same prompts, same T and top_p),
    # when the oracle could be computed
    sampled_gap: Gap | None = None
    sampled_label: str = ""
    concurrent: AcceptanceProfile | None = None  # greedy at concurrency 8
    # greedy at concurrency 1 measured again, after the first pass: the c=8 pass's comparison
    # (the same prompts seen before, as the c=8 pass sees them: a prefix cache warm for both)
    greedy_again: AcceptanceProfile | None = None
    # greedy at concurrency 1 with the c=8 pass's own request length, where that pass's
    # requests were made longer to run together: then its comparison instead
    concurrent_reference: AcceptanceProfile | None = None
    windows: tuple[AcceptanceProfile, ...] = ()  # log windows in uptime order
    # greedy on the same prompts a second time on the same server, against the first
    repeat: RepeatFall | None = None
    errors: tuple[str, ...] = ()
    tok_s: float | None = None
    tok_s_spec_off: float | None = None
    method: str | None = None
    # The k of the server measured, where its profile does not carry it (a user's --k).
    k: int | None = None
    # Why speculation is known to be off (a log with decode lines and no speculative figure).
    speculation_off: str | None = None
    # A drafter that does not draft at every step: accepted per decode step against its
    # oracle's (``oracle_gap.step_gap``), where the oracle ran
    step_gap: Gap | None = None

    @property
    def variable_length(self) -> bool:
        return self.method in LOOKUP_METHODS

    @property
    def trained(self) -> bool:
        """The drafter is a model trained on the target (not prompt lookup)."""
        return trained_drafter(self.method)


@dataclass(frozen=True)
class Signature:
    cls: str
    evidence: str
    shape: str                       # the greedy shape alone (healthy, cliff, ...)
    also: tuple[str, ...] = ()       # further classes that apply
    numbers: dict[str, Any] = field(default_factory=dict)
    cliff_at: int | None = None

    @property
    def classes(self) -> tuple[str, ...]:
        return (self.cls, *[c for c in self.also if c != self.cls])

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls, "evidence": self.evidence, "shape": self.shape,
                "also": list(self.also), "numbers": self.numbers, "cliff_at": self.cliff_at}


# -- shape of one profile against a reference ---------------------------------------------------

def within(measured: float, ref: float, tolerance: float, high: float | None = None) -> bool:
    """Within tolerance below the reference (being above it is never "low"); a 95% interval
    reaching the band counts as within."""
    floor = ref * (1.0 - tolerance) - ABS_SLACK
    return measured >= floor or (high is not None and high >= floor)


def _pos_high(p: AcceptanceProfile, i: int) -> float | None:
    iv = p.intervals.get(f"per_position[{i}]")
    return None if iv is None else iv.high


def find_cliff(pp: list[float], ref_cond: list[float | None] | None = None) -> int | None:
    """The first position j >= 1 whose conditional rate collapses after a position that held.

    With a reference, the positions before j must keep at least half their reference's
    conditional rate (otherwise the loss started earlier: a decay, not a cliff)."""
    cond = conditional_from_unconditional(pp)
    for j in range(1, len(pp)):
        c = cond[j]
        if pp[j - 1] < CLIFF_MIN_BEFORE or c is None or c >= CLIFF_CONDITIONAL:
            continue
        if ref_cond is not None:
            held = all((cond[i] or 0.0) >= 0.5 * (ref_cond[i] or 0.0)
                       for i in range(min(j, len(ref_cond))))
            if not held:
                continue
            if j < len(ref_cond) and (ref_cond[j] or 0.0) < 2 * CLIFF_CONDITIONAL:
                continue  # the reference itself falls off here
        return j
    return None


def has_acceptance(p: AcceptanceProfile | None) -> bool:
    """Drafts were counted, or an acceptance length was printed (rate-only windows)."""
    return p is not None and (p.has_drafts or p.reported_mean_acceptance_length is not None)


def apd_bounds(p: AcceptanceProfile) -> tuple[float, float] | None:
    """Accepted draft tokens per step (bonus NOT counted), the lowest and highest the profile
    allows: one value when the draft count is known; the range its ``drafts_range`` (or its
    rate-only windows) allow when it is not; None when nothing bounds it."""
    if p.drafts and p.accepted_tokens is not None:
        x = p.accepted_tokens / p.drafts
        return x, x
    r = p.mean_acceptance_length_range
    if r is not None:
        return r[0] - 1.0, r[1] - 1.0
    if p.drafts is None and p.reported_mean_acceptance_length is not None:
        x = p.reported_mean_acceptance_length - 1.0
        return x, x
    return None


def drafted_words(p: AcceptanceProfile) -> str:
    """What was drafted, in the counts the source gave."""
    if p.drafts is not None:
        return f"{p.drafts} drafts"
    if p.draft_tokens is None:
        return "drafts not counted"
    return f"{p.draft_tokens} draft tokens (the draft count is not printed)"


def measured_words(p: AcceptanceProfile, b: tuple[float, float]) -> str:
    """Accepted per draft as the bounds allow, and where a range comes from."""
    lo, hi = b
    if f"{lo:.2f}" == f"{hi:.2f}":
        return f"{lo:.2f} accepted per draft"
    words = f"between {lo:.2f} and {hi:.2f} accepted per draft"
    if not p.count_weighted:
        return words + (" (rate-only windows: the run's mean lies between the lowest and "
                        "highest window's)")
    r = p.drafts_range
    return words + (f" ({p.accepted_tokens} accepted of {p.draft_tokens} draft tokens; the draft "
                    f"count is not printed, and {r[0]} to {r[1]} drafts fit what is)" if r else "")


def binomial_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a rate seen ``hits`` times in ``n`` trials (pure; n >= 1)."""
    import math

    tail = (1.0 - level) / 2

    def cdf(x: int, p: float) -> float:   # P(X <= x), X ~ Binomial(n, p)
        if p <= 0.0:
            return 1.0
        if p >= 1.0:
            return 1.0 if x >= n else 0.0
        lp, lq = math.log(p), math.log1p(-p)
        head = math.lgamma(n + 1)
        return sum(math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp
                            + (n - i) * lq) for i in range(0, x + 1))

    def solve(f: Any) -> float:  # the p where f turns False, f(0) True and f(1) False
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if hits <= 0 else solve(lambda p: 1.0 - cdf(hits - 1, p) < tail)
    high = 1.0 if hits >= n else solve(lambda p: cdf(hits, p) > tail)
    return low, high


def draft_bounds(p: AcceptanceProfile) -> tuple[int, int] | None:
    """The fewest and most drafts (verify steps) a profile can hold: its count when printed,
    else the range its figures allow, else what its draft tokens allow (each draft carries 1 to
    k tokens; k at most ``MAX_K`` where unknown)."""
    if p.drafts is not None:
        return p.drafts, p.drafts
    if p.drafts_range is not None:
        return p.drafts_range
    if p.draft_tokens:
        return -(-p.draft_tokens // (p.k or MAX_K)), p.draft_tokens
    return None


def sample_words(p: AcceptanceProfile) -> str:
    """How few drafts a profile holds, with position 0's 95% interval where its count is
    known, when even the most it can hold are few (under ``FEW_DRAFTS``); "" otherwise."""
    b = draft_bounds(p)
    if b is None or b[1] >= FEW_DRAFTS or b[1] <= 0:
        return ""
    if p.drafts is None:
        return f"from at most {b[1]} drafts (verify steps; the count is not printed): few"
    n = p.drafts
    hits = (p.accepted_per_position[0] if p.accepted_per_position
            else 0 if p.accepted_tokens == 0 else None)
    if hits is None:
        return f"from only {n} drafts (verify steps)"
    lo, hi = binomial_interval(hits, n)
    return (f"from only {n} drafts (verify steps): position 0 accepted in {hits} of {n}, 95% "
            f"interval {lo:.2f}-{hi:.2f}")


def _nothing_accepted(p: AcceptanceProfile) -> tuple[str, str, None]:
    """Drafts proposed and none accepted: ``zero`` when enough were drafted that a working
    drafter would have had some accepted; else ``undetermined``, saying how few."""
    b = draft_bounds(p)
    n = b[0] if b is not None else 1
    high = binomial_interval(0, max(n, 1))[1]
    if high >= ZERO_MAX_HIGH:
        return ("undetermined", f"{drafted_words(p)}, 0 accepted: too few to tell a broken "
                f"drafter from a working one (position 0 between 0.00 and {high:.2f}, 95% "
                "interval)", None)
    return ("zero", f"{drafted_words(p)}, 0 accepted: every draft rejected (position 0 under "
            f"{high:.3f}, 95% interval)", None)


def too_few_to_tell(p: AcceptanceProfile | None) -> bool:
    """Drafts counted, none accepted, and too few of them to call it ``zero``: a longer
    measurement of the same server would tell (pure)."""
    return (p is not None and bool(p.drafts) and p.accepted_tokens == 0
            and _nothing_accepted(p)[0] == "undetermined")


def _few_for_zero(p: AcceptanceProfile) -> bool:
    """Position 0's count is known and too few drafts were seen to call it broken."""
    n = p.drafts
    if not n or not p.accepted_per_position:
        return False
    return binomial_interval(p.accepted_per_position[0], n)[1] >= ZERO_MAX_HIGH


def shape(p: AcceptanceProfile | None, ref: Reference | None, variable_length: bool = False,
          k: int | None = None, trained: bool = False) -> tuple[str, str, int | None]:
    """(class, evidence, cliff position) of one greedy profile; ``k`` where the profile does
    not carry it; ``trained``: the drafter is a trained model (position 0 under ``ZERO_POS0``
    is then ``zero``)."""
    if p is not None and p.draft_tokens == 0 and not p.drafts:
        return ("no-data", "nothing drafted: 0 draft tokens, so nothing to accept (speculation "
                "did not run, e.g. turned off above a batch size), not drafts all rejected", None)
    if p is None or not has_acceptance(p):
        return "no-data", "no draft was counted", None
    k = p.k if k is None else k
    if p.accepted_tokens == 0:
        return _nothing_accepted(p)
    b = apd_bounds(p)
    if not p.count_weighted and b is not None and b[1] < PRINTED_ZERO:
        return ("undetermined", "acceptance length 1.00 in every window (under 0.005 draft "
                "tokens accepted per step): nothing accepted, but the lines print rates, not "
                "draft counts, so they do not tell drafts all rejected from steps that drafted "
                "nothing (speculation not running, e.g. turned off above a batch size)", None)
    pp = p.per_position
    broken = ("a trained drafter that agrees with its target this rarely is broken, not weak")
    if trained and pp and pp[0] < ZERO_POS0 and not _few_for_zero(p):
        return ("zero", "pos " + ", ".join(f"{i} {r:.3f}" for i, r in enumerate(pp))
                + f": position 0 under {ZERO_POS0} from a trained drafter; {broken}", None)
    if trained and pp is None and b is not None and b[1] < ZERO_POS0:
        return ("zero", f"{measured_words(p, b)}, under {ZERO_POS0} (so is position 0) from a "
                f"trained drafter; {broken}", None)
    if pp is None:
        return _shape_from_total(p, ref, k, "")
    nums = "pos " + ", ".join(f"{i} {r:.2f}" for i, r in enumerate(pp))
    ref_cond = ref.conditional() if ref is not None else None
    if not variable_length:
        j = find_cliff(pp, ref_cond)
        if j is not None:
            ev = f"{nums}: the conditional rate at pos{j} is {pp[j] / pp[j - 1]:.2f}" + (
                f" (reference {ref_cond[j]:.2f})" if ref_cond and j < len(ref_cond)
                and ref_cond[j] is not None else "")
            return "cliff", ev, j
    if ref is None:
        return "unreferenced", f"{nums}; no reference to compare with", None
    if not ref.shape_stated:
        return _shape_from_total(p, ref, k, f"{nums}: ")
    n = min(len(pp), ref.k)
    rnums = "/".join(f"{r:.2f}" for r in ref.per_position[:n])
    unstated = (f"; positions {n}-{len(pp) - 1} not compared (the reference states {n})"
                if len(pp) > n else "")
    against = f"{nums} vs {ref.words()} {rnums}{unstated}"
    low = [i for i in range(n) if not within(pp[i], ref.per_position[i], ref.tolerance,
                                             _pos_high(p, i))]
    if not low:
        if ref.source == "oracle" and ref.per_position and ref.per_position[0] < WEAK_DRAFTER_POS0:
            # The engine reaches the oracle, and the oracle itself is low: low all the same
            # (the oracle runs the served files as they are, so it shares their errors).
            return (own_shape(pp), f"{against}: equal to the oracle, and the oracle itself is "
                    f"low (pos0 {ref.per_position[0]:.2f} < {WEAK_DRAFTER_POS0})", None)
        return "healthy", f"{against}: within {ref.tolerance:.0%} at every position", None
    ratios = [pp[i] / ref.per_position[i] if ref.per_position[i] > 0 else 1.0 for i in range(n)]
    lens = " (variable-length drafts: later positions count short drafts)" if variable_length \
        else ""
    if n >= 2 and ratios[0] > 0 and ratios[-1] / ratios[0] < DECAY_RATIO and not variable_length:
        return ("steep-decay", f"{against}: ratio to reference {ratios[0]:.2f} at pos0, "
                f"{ratios[-1]:.2f} at pos{n - 1}", None)
    return ("uniform-low", f"{against}: ratio to reference "
            + ", ".join(f"{r:.2f}" for r in ratios) + lens, None)


def own_shape(pp: list[float]) -> str:
    """Low with no reference to divide by: steep decay if the conditional rate halves from
    position 0 to the last position, else uniformly low."""
    cond = [c for c in conditional_from_unconditional(pp) if c is not None]
    if len(cond) >= 2 and cond[0] > 0 and cond[-1] / cond[0] < DECAY_RATIO:
        return "steep-decay"
    return "uniform-low"


def _shape_from_total(p: AcceptanceProfile, ref: Reference | None, k: int | None, nums: str
                      ) -> tuple[str, str, None]:
    """Accepted per draft against the reference's at the same k, on the bounds the profile
    allows: healthy when even the lowest is within the band, low when even the highest is
    below it, undetermined between."""
    b = apd_bounds(p)
    if b is None:
        rate = p.acceptance_rate
        what = (f"{nums}{p.accepted_tokens} accepted of {p.draft_tokens} draft tokens"
                + (f" (acceptance rate {rate:.2f})" if rate is not None else "")
                + ": accepted per draft is not known (the draft count is not printed, and "
                "nothing bounds it)")
        return "unreferenced", what + ("; no reference" if ref is None else ""), None
    meas = nums + measured_words(p, b)
    if ref is None:
        return "unreferenced", f"{meas}; no reference", None
    if k != ref.k:
        why = "k is unknown" if k is None else f"k={k}"
        return ("unreferenced", f"{meas}; the {ref.words()} is for one k and this server's "
                f"{why}: not compared", None)
    r = ref.accepted_per_draft
    ev = f"{meas} vs {ref.words()} {r:.2f} accepted per draft"
    lo, hi = b
    # the 95% interval (on the bounds, for a range) reaching the band counts as within
    iv = p.intervals.get("accepted_per_draft")
    top = None if iv is None else iv.high
    if within(lo, r, ref.tolerance, top if lo == hi else None):
        return "healthy", ev + (f": within {ref.tolerance:.0%}" if lo == hi else
                                f": even the lowest is within {ref.tolerance:.0%}"), None
    if not within(hi, r, ref.tolerance, top):
        return "uniform-low", ev + ("" if lo == hi else ": even the highest is below it"), None
    return ("undetermined", ev + f": the range reaches both into its {ref.tolerance:.0%} band "
            "and below it; the log does not say which", None)


# -- the other facts ----------------------------------------------------------------------------

def classify(f: Facts) -> Signature:
    """One class (the most specific trouble), its evidence in numbers, the others that apply."""
    base, ev, cliff_at = shape(f.greedy, f.reference, f.variable_length, f.k, f.trained)
    if base == "healthy" and f.variable_length and f.step_gap is not None and f.step_gap.below:
        # its drafts are accepted as often as the oracle's, but it drafts on fewer steps
        base = "uniform-low"
        ev = (f"{ev} per draft, but it drafts on fewer steps than its oracle: "
              f"{f.step_gap.text()}")
    if base == "no-data" and f.speculation_off:
        ev = f"speculation is off: {f.speculation_off}"
    few = sample_words(f.greedy) if f.greedy is not None and base != "no-data" else ""
    if few and "0 accepted" not in ev:
        ev = f"{ev} ({few})"
    also: list[str] = []
    parts = [ev]
    nums: dict[str, Any] = {}
    if f.greedy is not None and f.greedy.per_position is not None:
        nums["per_position"] = [round(x, 4) for x in f.greedy.per_position]
        nums["mean_acceptance_length"] = round(f.greedy.mean_acceptance_length or 0, 4)
    elif f.greedy is not None and (b := apd_bounds(f.greedy)) is not None:
        nums["accepted_per_draft_range"] = [round(b[0], 4), round(b[1], 4)]
    if f.greedy is not None and (db := draft_bounds(f.greedy)) is not None:
        nums["drafts_range"] = list(db)
    if f.reference is not None:
        nums["reference"] = f.reference.to_json()
    if f.errors:
        also.append("crash")
        parts.append(f"{len(f.errors)} error line(s), first: {f.errors[0][:160]}")
    else:
        parts.append("no error")
    healthy_greedy = base == "healthy"
    if f.sampled is not None and f.sampled.has_drafts:
        s = f.sampled.accepted_per_draft or 0.0
        g = f.greedy.accepted_per_draft if f.greedy is not None else None
        nums["sampled_accepted_per_draft"] = round(s, 4)
        falls = bool(g) and s < SAMPLED_SHARE * g
        if g:
            parts.append(f"sampled ({f.sampled_label or 'T>0'}) {s:.2f} accepted per draft vs "
                         f"greedy {g:.2f}")
        off = f.sampled_gap is not None and (f.sampled_gap.below or f.sampled_gap.above)
        if f.sampled_gap is not None:
            sg = f.sampled_gap
            way = "below" if sg.below else "above" if sg.above else "not significantly off"
            parts.append(f"sampled {way} its oracle ({sg.text()})")
            nums["sampled_oracle_accepted_per_draft"] = round(sg.oracle, 4)
        if (falls or off) and (healthy_greedy or f.greedy is None or base == "unreferenced"):
            also.append("sampling-bound")
    one = (f.concurrent_reference if f.concurrent_reference is not None
           else f.greedy_again if f.greedy_again is not None else f.greedy)
    if f.concurrent is not None and one is not None and differs(f.concurrent, one, LOAD_SHARE):
        also.append("load-dependent")
        parts.append(f"c=8 {f.concurrent.accepted_per_draft:.2f} vs c=1 "
                     f"{one.accepted_per_draft:.2f} accepted per draft")
    d = drift(f.windows)
    if d is not None:
        nums["drift_first_last"] = [round(d[0], 4), round(d[1], 4)]
        if d[1] < (1 - DRIFT_SHARE) * d[0]:
            also.append("drifting")
            parts.append(f"accepted per draft {d[0]:.2f} in the first third of uptime, "
                         f"{d[1]:.2f} in the last")
    if f.repeat is not None:
        nums["repeat_first_again"] = [round(f.repeat.first, 4), round(f.repeat.again, 4)]
        if repeat_fell(f.repeat) and "drifting" not in also:
            also.append("drifting")
            parts.append(f"the same prompts again on the same server: {f.repeat.first:.2f} → "
                         f"{f.repeat.again:.2f} accepted per draft")
    if f.tok_s is not None and f.tok_s_spec_off:
        ratio = f.tok_s / f.tok_s_spec_off
        nums["tok_s_vs_spec_off"] = round(ratio, 3)
        parts.append(f"{ratio:.2f}x the spec-off tok/s")
        if ratio < SLOWER_SHARE and base in ("healthy", "unreferenced"):
            also.append("slower-than-spec-off")
    order = ("crash", "zero", "cliff", "steep-decay", "uniform-low", "sampling-bound",
             "load-dependent", "drifting", "slower-than-spec-off")
    present = [base, *also]
    cls = next((c for c in order if c in present), base)
    return Signature(cls, "; ".join(parts), base, tuple(c for c in present if c != cls), nums,
                     cliff_at)
