"""The replay's decisions, pure: is an engine-side gap lost (or gained) in drafting or in
verification?

The input is ``oracle.engine_trace.Replay``: every engine step re-scored on the engine's own
context with the oracle's models. Two questions, asked separately because both can be wrong:

- **Drafting** (``drafting``): are the drafts the engine verified the drafter's own proposal
  on that context? A difference counts where the drafter itself separates its choice from the
  engine's by more than ``NEAR_TIE`` (a logit margin fp32 can hardly tell apart). Drafts differ
  when at least ``MIN_CLEAR`` steps, and ``MIN_SHARE`` of the comparable ones, differ clearly.
  What it costs: the acceptance a correct verifier gives the drafter's chain minus what it
  gives the engine's drafts, on the same contexts.
- **Verification** (``verification``): given the engine's drafts, does the engine accept what a
  correct verifier accepts? Per position i, the engine's realized count R_i (steps that
  accepted i + 1 drafts or more) against the expected count E_i = Σ_steps β_0 ⋯ β_i, where
  β_j is the probability that a correct verifier accepts draft j given the earlier ones. Given
  the contexts, each step's outcome is a Bernoulli draw with that probability, so R_i − E_i
  has variance V_i = Σ e(1 − e): z = (R_i − E_i) / √V_i, tested two-sided at ``ALPHA`` with
  Bonferroni over the positions, and the rate difference must reach ``MIN_RATE_GAP`` (so that
  numerics between an fp32 oracle and the engine cannot decide with many steps). Greedy
  (every β is 0 or 1, V = 0): a step whose outcome differs from the correct one at a position
  where the target's own margin is at least ``NEAR_TIE`` is a clear difference, and at least
  ``MIN_CLEAR`` of them decide. Sampled steps can be certain too (a drafter whose q never
  exceeds the target's p there: β = 1, V = 0, so z cannot see them): an outcome a correct
  verifier gives with probability under ``SURE`` is impossible, and at least ``MIN_CLEAR`` of
  them (and ``MIN_SHARE`` of the steps), with a rate difference of ``SURE_RATE_GAP``, decide.

- **Mechanism** (``transform_check``): where drafts differ, are they the drafter's own chain
  run the way one transformation of ``oracle.transforms`` says (positions off, taps from
  another layer, a norm moved, a weight taken from the target, ...)? Each transformation's
  chain is computed on every compared step. The clearly differing steps are split by request
  into a search half (even requests) and a held-out half (odd ones): the search picks, among
  the transformations that reproduce ``EXPLAINS`` of the differing steps of its half, the one
  with the highest share there; it names the mechanism only if that one also reproduces
  ``EXPLAINS`` of the held-out half and of all the differing steps, at least ``MIN_CLEAR`` of
  them, and the engine follows the plain chain against it in at most ``CONTRADICTS`` of the
  steps where the two part. Why these bounds: a chain reproduces a
  step only when all its drafts are token-equal to the engine's, which a transformation
  unrelated to the engine's fault does on almost no step that differs from the plain chain
  (the healthy and unrelated recordings in the tests: none explains a tenth), while the
  engine's own mechanism reproduces every step but near-ties; and an engine that drafts the
  plain chain where the transformation would part from it is not running that
  transformation.

Verification that differs → ``rejection-sampler`` (the rejection sampler, the temperature or
top-p it applies, or the target logits it reads); drafts that differ → ``engine-drafting``,
with the mechanism a transformation reproduces, or ``rope-sync`` where that transformation is
a position offset; drafts that differ and no transformation reproduces stay a localisation
("drafting differs; mechanism not determined"), with what was tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from collections.abc import Sequence
from typing import Any

from specdoctor.oracle import transforms as T
from specdoctor.verdict.findings import Finding, Verdict
from specdoctor.verdict.sizing import GREEDY, PER_STEP, SAMPLED, Size

NEAR_TIE = 1e-3        # logit margin (top1 - top2) below which fp32 cannot separate two tokens
MIN_CLEAR = 2          # clear differences needed (one alone is reported, not decided on)
MIN_SHARE = 0.01       # ... and this share of the comparable steps
ALPHA = 1e-3           # family-wise, two-sided, over the positions
MIN_RATE_GAP = 0.02    # |R_i - E_i| / steps, accepted per step at position i
MIN_STEPS = 20         # fewer drafting steps decide nothing
SURE = 1e-6            # a correct verifier's outcome below this probability is impossible
SURE_RATE_GAP = 0.10   # ... and the rate difference that must come with such outcomes (fp32
                       # oracle vs an engine whose p and q differ by numerics: a few points)
BAND_FACTOR = 2        # drafts differ beyond numerics: more than this many bands (+ MIN_CLEAR)
OFFSETS = T.OFFSETS    # rotary position offsets of the draft decode steps tried
EXPLAINS = 0.8         # share of the clearly differing steps a transformed chain must reproduce
PAIR_FROM = 0.5        # share of the differing steps one transformation must reproduce alone for
#                        its pairs with the others to be tried
CONTRADICTS = 0.1      # most steps, of those where transformed and plain chains part, on the plain


@dataclass(frozen=True)
class NumericsBand:
    """What the served precision alone does to the drafter's chain, on the engine's own
    contexts: the reference drafter run at the served dtype (the chain the drafts are compared
    with) against the same drafter at fp32, counted as the drafts are (a difference where the
    served-dtype chain's margin is at least ``NEAR_TIE``)."""

    dtype: str
    steps: int      # steps both chains were computed on
    differ: int     # ... where they differ clearly

    @property
    def allowed(self) -> int:
        """Clearly differing steps the engine's drafts may show from numerics alone: the
        engine's kernels and the reference's are two implementations at the served precision,
        each up to a band from fp32, so up to ``BAND_FACTOR`` bands from each other."""
        return BAND_FACTOR * self.differ

    def text(self) -> str:
        return (f"the served precision alone ({self.dtype} against fp32, the same drafter on "
                f"the same contexts) changes the chain clearly on {self.differ} of "
                f"{self.steps} steps")

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "steps": self.steps, "differ": self.differ,
                "allowed": self.allowed}


def numerics_band(replay: Any, fp32_chains: list[list[int] | None], dtype: str,
                  near_tie: float = NEAR_TIE) -> NumericsBand:
    """``fp32_chains``: per record of ``replay`` (re-scored with the served-dtype drafter), the
    fp32 drafter's chain on the same context (``engine_trace.reference_chains``)."""
    steps = differ = 0
    for r, ch in zip(replay.records, fp32_chains):
        if ch is None or r.chain is None:
            continue
        steps += 1
        j = next((i for i, (a, b) in enumerate(zip(r.chain, ch)) if a != b), None)
        if j is not None and not (j < len(r.chain_margins) and r.chain_margins[j] < near_tie):
            differ += 1
    return NumericsBand(dtype, steps, differ)


@dataclass(frozen=True)
class DraftingCheck:
    steps: int                       # steps whose drafts could be compared with the chain
    differ: int                      # ... whose drafts differ clearly from the drafter's
    near_ties: int                   # ... differ only where the drafter itself nearly ties
    first_position: tuple[int, ...]  # clear differences by the position where they start
    tokens: int                      # draft tokens compared (up to each step's first difference)
    tokens_equal: int
    expected_engine: float           # accepted per step a correct verifier gives its drafts
    expected_chain: float            # ... gives the drafter's own chain, same contexts (steps
    #                                  the engine drafted nothing at count what the chain loses)
    examples: tuple[dict[str, Any], ...] = ()
    loss_se: float | None = None     # standard error of ``loss`` over the compared steps
    # what the served precision alone does to the chain (None: served at fp32, or not measured)
    band: NumericsBand | None = None

    @property
    def differs(self) -> bool:
        return (self.steps >= MIN_STEPS and self.differ >= MIN_CLEAR
                and self.differ >= MIN_SHARE * self.steps and self.beyond_band)

    @property
    def beyond_band(self) -> bool:
        """More clearly differing steps than the served precision alone gives."""
        return self.band is None or self.differ >= self.band.allowed + MIN_CLEAR

    @property
    def comparable(self) -> bool:
        return self.steps >= MIN_STEPS

    @property
    def loss(self) -> float:
        """Accepted per step the engine's drafting loses against its drafter's chain."""
        return self.expected_chain - self.expected_engine

    def size(self, on: str) -> Size:
        """``loss`` with its 95% interval over the compared steps (the unit ``sizing`` states
        a cause in)."""
        half = None if self.loss_se is None else 1.96 * self.loss_se
        return Size(self.loss, None if half is None else self.loss - half,
                    None if half is None else self.loss + half, on,
                    "replay: a correct verifier's acceptance of the drafter's chain minus of the "
                    "engine's drafts, same contexts")

    def text(self) -> str:
        if not self.steps:
            return "the drafts could not be compared with the drafter's (sampled drafts)"
        where = ", ".join(f"{n} at position {i}" for i, n in enumerate(self.first_position) if n)
        return (f"drafts equal the drafter's own chain in {self.tokens_equal} of {self.tokens} "
                f"tokens; {self.differ} of {self.steps} steps differ clearly"
                + (f" ({where})" if where else "")
                + (f", {self.near_ties} more only at a near-tie" if self.near_ties else "")
                + (f"; a correct verifier accepts {self.expected_chain:.3f} per step from the "
                   f"drafter's chain vs {self.expected_engine:.3f} from the engine's drafts"
                   if self.differ else "")
                + (f"; {self.band.text()}"
                   + ("" if self.beyond_band else ": within what precision alone gives")
                   if self.band is not None else ""))

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "differ": self.differ, "near_ties": self.near_ties,
                "first_position": list(self.first_position), "tokens": self.tokens,
                "tokens_equal": self.tokens_equal,
                "expected_engine": round(self.expected_engine, 5),
                "expected_chain": round(self.expected_chain, 5), "differs": self.differs,
                "examples": list(self.examples),
                "band": None if self.band is None else self.band.to_json()}


@dataclass(frozen=True)
class PositionTest:
    position: int
    steps: int
    realized: int
    expected: float
    variance: float
    clear: int            # greedy: steps whose outcome differs beyond near-ties
    near_ties: int        # greedy: steps whose outcome differs only at a near-tie
    z: float | None       # sampled: (R - E) / sqrt(V)
    critical: float
    greedy: bool = False  # every beta 0 or 1: counted, not tested
    impossible: int = 0   # sampled: outcomes a correct verifier gives with probability < SURE

    @property
    def rate_gap(self) -> float:
        return (self.realized - self.expected) / max(self.steps, 1)

    @property
    def deterministic(self) -> bool:
        return self.greedy

    @property
    def significant(self) -> bool:
        if self.deterministic:
            return self.clear >= MIN_CLEAR and self.clear >= MIN_SHARE * self.steps
        if (self.impossible >= MIN_CLEAR and self.impossible >= MIN_SHARE * self.steps
                and abs(self.rate_gap) >= SURE_RATE_GAP):
            return True
        return (self.z is not None and abs(self.z) > self.critical
                and abs(self.rate_gap) >= MIN_RATE_GAP)

    def why(self) -> str:
        """What makes this position significant, in words."""
        if self.deterministic:
            return f"position {self.position}: {self.clear} clear difference(s)"
        if self.z is not None and abs(self.z) > self.critical:
            return f"position {self.position}: z = {self.z:+.1f}"
        return (f"position {self.position}: {self.impossible} outcome(s) a correct verifier "
                f"gives with probability under {SURE:g}")

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "steps": self.steps, "realized": self.realized,
                "expected": round(self.expected, 4), "variance": round(self.variance, 4),
                "clear": self.clear, "near_ties": self.near_ties,
                "z": None if self.z is None else round(self.z, 2),
                "critical": round(self.critical, 3), "impossible": self.impossible,
                "significant": self.significant}


@dataclass(frozen=True)
class VerificationCheck:
    positions: tuple[PositionTest, ...]
    steps: int
    temperature: float
    top_p: float

    @property
    def differs(self) -> bool:
        return self.steps >= MIN_STEPS and any(p.significant for p in self.positions)

    @property
    def direction(self) -> str:
        worst = max(self.positions, key=lambda p: abs(p.rate_gap), default=None)
        return "" if worst is None else ("above" if worst.rate_gap > 0 else "below")

    def per_step(self, attr: str) -> list[float]:
        n = max(self.steps, 1)
        return [getattr(p, attr) / n for p in self.positions]

    def size(self, on: str) -> Size:
        """How far the engine's accepted count per step is from a correct verifier's on its
        own drafts, either way, with a 95% interval: the per-position counts are nested
        (accepting position i needs i - 1 accepted), so their spreads are added as if fully
        correlated, the wider bound. Greedy steps have no spread: their outcomes are counted."""
        n = max(self.steps, 1)
        dev = abs(sum(p.realized - p.expected for p in self.positions)) / n
        half = 1.96 * sum(math.sqrt(max(p.variance, 0.0)) for p in self.positions) / n
        return Size(dev, dev - half, dev + half, on,
                    "replay: the engine's accepted count against a correct verifier's expected "
                    "count on the engine's own drafts")

    def text(self) -> str:
        real = "/".join(f"{x:.3f}" for x in self.per_step("realized"))
        exp = "/".join(f"{x:.3f}" for x in self.per_step("expected"))
        sig = [p for p in self.positions if p.significant]
        how = ("; ".join(p.why() for p in sig) if sig
               else "no position differs significantly")
        return (f"on the engine's own {self.steps} steps the engine accepted {real} per "
                f"position per step where a correct verifier accepts {exp} in expectation "
                f"({how})")

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "temperature": self.temperature, "top_p": self.top_p,
                "positions": [p.to_json() for p in self.positions], "differs": self.differs,
                "direction": self.direction}


def drafting(replay: Any, near_tie: float = NEAR_TIE, band: NumericsBand | None = None
             ) -> DraftingCheck:
    """The engine's drafts against the drafter's own chain, step by step (``replay``: an
    ``engine_trace.Replay``); ``band``: what the served precision alone does there."""
    k = max(replay.k, 1)
    steps = differ = ties = tokens = equal = 0
    first = [0] * k
    e_engine = e_chain = 0.0
    d_sum = d_sq = 0.0
    examples: list[dict[str, Any]] = []
    for r in replay.records:
        if r.chain is None:
            continue
        steps += 1
        j = r.first_mismatch()
        upto = len(r.drafts) if j is None else j
        tokens += max(len(r.drafts), len(r.chain)) if j is None else j + 1
        equal += upto
        eng = _expected_total(r.betas)
        chn = eng if r.chain_betas is None else _expected_total(r.chain_betas)
        e_engine += eng
        e_chain += chn
        d_sum += chn - eng
        d_sq += (chn - eng) ** 2
        if j is None:
            continue
        margin = r.chain_margins[j] if j < len(r.chain_margins) else None
        if margin is not None and margin < near_tie:
            ties += 1
            continue
        differ += 1
        first[min(j, k - 1)] += 1
        if len(examples) < 3:
            examples.append({"request": r.request, "row": r.row, "position": j,
                             "engine": r.drafts, "drafter": r.chain,
                             "drafter_margin": None if margin is None else round(margin, 4)})
    n = max(steps, 1)
    se = (math.sqrt(max(d_sq / n - (d_sum / n) ** 2, 0.0) * n / (n - 1) / n)
          if steps > 1 else None)
    return DraftingCheck(steps, differ, ties, tuple(first), tokens, equal, e_engine / n,
                         e_chain / n, tuple(examples), se, band)


def verification(replay: Any, near_tie: float = NEAR_TIE, alpha: float = ALPHA
                 ) -> VerificationCheck:
    """The engine's accept decisions against a correct verifier's, position by position."""
    k = max(replay.k, 1)
    crit = NormalDist().inv_cdf(1 - alpha / (2 * k))
    real = [0] * k
    exp = [0.0] * k
    var = [0.0] * k
    clear = [0] * k
    ties = [0] * k
    sure = [0] * k
    steps = 0
    greedy = replay.temperature <= 0
    for r in replay.records:
        if not r.drafts:
            continue
        steps += 1
        e = 1.0
        tie = False
        for i in range(min(len(r.betas), k)):
            e *= r.betas[i]
            tie = tie or (i < len(r.target_margins) and r.target_margins[i] < near_tie)
            got = 1 if r.accepted > i else 0
            real[i] += got
            exp[i] += e
            var[i] += e * (1 - e)
            if greedy and got != e:
                if tie:
                    ties[i] += 1
                else:
                    clear[i] += 1
            elif not greedy and (e if got else 1 - e) < SURE:
                sure[i] += 1
    tests = []
    for i in range(k):
        z = None if var[i] <= 1e-12 else (real[i] - exp[i]) / math.sqrt(var[i])
        tests.append(PositionTest(i, steps, real[i], exp[i], var[i], clear[i], ties[i], z,
                                  crit, greedy, sure[i]))
    return VerificationCheck(tuple(tests), steps, replay.temperature, replay.top_p)


def _expected_total(betas: list[float]) -> float:
    total, e = 0.0, 1.0
    for b in betas:
        e *= b
        total += e
    return total


def _fits(explained: int, differ: int) -> bool:
    return differ > 0 and explained >= EXPLAINS * differ


@dataclass(frozen=True)
class TransformCheck:
    """The engine's drafts against the drafter's chain run as ``transform`` says, over the
    steps the replay compared; the clearly differing steps split into a search half and a
    held-out half by request (even requests search, odd ones are held out)."""

    transform: T.Transform
    parted: int        # steps where the transformed chain differs from the plain one
    follows_plain: int  # ... and the engine's drafts are the plain chain's
    # (steps that equal the transformed chain, steps whose drafts differ clearly from the
    # plain chain) on the search half and on the held-out half
    search: tuple[int, int] = (0, 0)
    held_out: tuple[int, int] = (0, 0)

    @property
    def differ(self) -> int:
        """Steps whose drafts differ clearly from the plain chain."""
        return self.search[1] + self.held_out[1]

    @property
    def explained(self) -> int:
        """... and equal the transformed chain."""
        return self.search[0] + self.held_out[0]

    @property
    def offset(self) -> int:
        """The position offset of a ``positions`` transformation (0 for the others)."""
        return int(self.transform.value) if self.transform.family == "positions" else 0

    @property
    def contradicted(self) -> float:
        return self.follows_plain / self.parted if self.parted else 0.0

    @property
    def candidate(self) -> bool:
        """Reproduces the search half (what the search picks among)."""
        return _fits(*self.search) and self.contradicted <= CONTRADICTS

    @property
    def explains(self) -> bool:
        """Reproduces the differing steps, the held-out half included."""
        return (self.candidate and self.explained >= MIN_CLEAR
                and _fits(self.explained, self.differ) and _fits(*self.held_out))

    def text(self) -> str:
        return (f"run as '{self.transform.mechanism}' the drafter's chain is the engine's "
                f"drafts in {self.explained} of the {self.differ} steps that differ "
                f"({self.held_out[0]} of {self.held_out[1]} held out); where it and the plain "
                f"chain part ({self.parted} steps), the engine follows the plain one in "
                f"{self.follows_plain}")

    def brief(self) -> str:
        return f"{self.transform.id} {self.explained}/{self.differ}"

    def to_json(self) -> dict[str, Any]:
        return {"transform": self.transform.id, "family": self.transform.family,
                "offset": self.offset, "differ": self.differ, "explained": self.explained,
                "parted": self.parted, "follows_plain": self.follows_plain,
                "search": list(self.search), "held_out": list(self.held_out),
                "explains": self.explains}


def transform_check(replay: Any, t: T.Transform, chains: list[list[int] | None],
                    near_tie: float = NEAR_TIE) -> TransformCheck:
    """``chains``: per record of ``replay``, the drafter's chain run as ``t`` says
    (``engine_trace.transformed_chains``; None where not compared or not applicable)."""
    parted = plain = 0
    halves = [[0, 0], [0, 0]]
    for r, ch in zip(replay.records, chains):
        if ch is None or r.chain is None or not r.drafts:
            continue
        j = r.first_mismatch()
        clear = j is not None and not (j < len(r.chain_margins)
                                       and r.chain_margins[j] < near_tie)
        n = len(r.drafts)
        if clear:
            same = list(ch[:n]) == list(r.drafts)
            half = halves[r.request % 2]       # whole requests to each half: steps of one
            #                                    request are alike, so none is held out of itself
            half[0] += same
            half[1] += 1
        if list(ch[:n]) != list(r.chain[:n]):
            parted += 1
            plain += j is None
    return TransformCheck(t, parted, plain, (halves[0][0], halves[0][1]),
                          (halves[1][0], halves[1][1]))


def pairs_worth(checks: Sequence[TransformCheck]) -> list[T.Transform]:
    """The compositions worth a try: none when one transformation explains the differing steps
    alone; else, where the best one reproduces at least ``PAIR_FROM`` of them (search half),
    it together with each of the others (a second thing the engine does may change nothing
    visible alone). Compositions are never composed again."""
    singles = [c for c in checks if not c.transform.parts]
    if not singles or any(c.explains for c in singles):
        return []
    best = max(singles, key=lambda c: (c.search[0] / c.search[1] if c.search[1] else 0.0,
                                       c.explained))
    if not best.search[1] or best.search[0] < PAIR_FROM * best.search[1]:
        return []
    return [T.compose(best.transform, c.transform) for c in singles
            if c is not best and not c.transform.family == best.transform.family == "positions"]


def positions(replay: Any, offset: int, shifted: list[list[int] | None],
              near_tie: float = NEAR_TIE) -> TransformCheck:
    """``transform_check`` of the position offset ``offset`` (``engine_trace.shifted_chains``)."""
    return transform_check(replay, T.position(offset), shifted, near_tie)


@dataclass
class Localisation:
    """What the replay of one or more measurements says (by measurement label)."""

    verification: dict[str, VerificationCheck] = field(default_factory=dict)
    drafting: dict[str, DraftingCheck] = field(default_factory=dict)
    # label -> one check per transformation tried; absent: not tried (drafts equal, or the
    # search could not run: ``transforms_note`` says why)
    transforms: dict[str, tuple[TransformCheck, ...]] = field(default_factory=dict)
    transforms_note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"verification": {k: v.to_json() for k, v in self.verification.items()},
                "drafting": {k: v.to_json() for k, v in self.drafting.items()},
                "transforms": {k: [c.to_json() for c in v] for k, v in self.transforms.items()},
                "transforms_note": self.transforms_note}

    def mechanism(self) -> tuple[str, TransformCheck, tuple[str, ...]] | None:
        """The measurement and the transformation that reproduce its differing drafts, with
        the others that reproduce them as well (indistinguishable on these steps); None when
        the search's pick does not hold on the held-out steps, or nothing is picked."""
        for label, checks in self.transforms.items():
            if label not in self.drafting or not self.drafting[label].differs:
                continue
            picked = [c for c in checks if c.candidate]
            if not picked:
                continue
            def score(c: TransformCheck) -> tuple[float, int]:
                return c.search[0] / c.search[1], c.search[0]

            top = max(score(c) for c in picked)
            # the search's pick; between picks the search half cannot tell apart, the held-out
            # half decides
            tied = [c for c in picked if score(c) == top]
            best = next((c for c in tied if c.explains), tied[0])
            if best.explains:
                same = tuple(c.transform.id for c in checks
                             if c is not best and c.explains
                             and c.explained == best.explained)
                return label, best, same
        return None


def drafting_losses(numbers: dict[str, Any]) -> list[float]:
    """The drafting loss (``DraftingCheck.loss``) of every replayed measurement whose drafts
    differ, read back from the numbers the experiment recorded (``Localisation.to_json``)."""
    drafting = (numbers.get("localisation") or {}).get("drafting") or {}
    return [float(d["expected_chain"]) - float(d["expected_engine"])
            for d in drafting.values() if d.get("differs")]


def localise(replays: dict[str, Any], bands: dict[str, NumericsBand] | None = None
             ) -> Localisation:
    out = Localisation()
    for label, r in replays.items():
        out.verification[label] = verification(r)
        out.drafting[label] = drafting(r, band=(bands or {}).get(label))
    return out


def decide(loc: Localisation) -> list[Finding]:
    """Findings for rejection-sampler (verification), engine-drafting and rope-sync
    (drafting), basis replay. Confirmed when any replayed measurement differs; excluded when
    every one was compared on enough steps and none differs; inconclusive otherwise."""
    ver_bad = {k: v for k, v in loc.verification.items() if v.differs}
    dra_bad = {k: d for k, d in loc.drafting.items() if d.differs}

    def lines(keys: Any) -> str:
        return "; ".join(f"[{k}] {loc.verification[k].text()}; {loc.drafting[k].text()}"
                         for k in keys)

    out: list[Finding] = []
    # Shares of what the replay saw off the correct engine: drafting's loss against the
    # verifier's deviation (orders the two when both are confirmed).
    ver_dev = sum(abs(sum(p.rate_gap for p in v.positions)) for v in ver_bad.values())
    dra_dev = sum(abs(d.loss) for d in dra_bad.values())
    total = ver_dev + dra_dev
    if ver_bad:
        way = {v.direction for v in ver_bad.values()}
        worst = max(ver_bad, key=lambda k: ver_bad[k].size(_on(k)).loss)
        out.append(Finding(
            "rejection-sampler", Verdict.CONFIRMED,
            f"{lines(ver_bad)}: the engine accepts {'/'.join(sorted(way))} what a correct "
            f"verifier accepts on its own drafts: lost in verification (the rejection sampler, "
            f"the temperature or top-p it applies, or the target logits it reads)"
            + ("" if dra_bad else ", not in drafting"),
            recovered=ver_dev / total if total else 1.0, basis="replay",
            size=ver_bad[worst].size(_on(worst))))
    elif loc.verification and all(v.steps >= MIN_STEPS for v in loc.verification.values()):
        out.append(Finding("rejection-sampler", Verdict.EXCLUDED,
                           f"{lines(loc.verification)}: the engine accepts what a correct "
                           f"verifier accepts", basis="replay"))
    else:
        out.append(Finding("rejection-sampler", Verdict.INCONCLUSIVE,
                           f"too few drafting steps were replayed ({lines(loc.verification)})"))
    share = dra_dev / total if total else 1.0
    out += _drafting_findings(loc, dra_bad, lines, share)
    return out


DRAFTING = ("engine-drafting", "rope-sync")


def in_gap_units(found: list[Finding], gap: Any) -> list[Finding]:
    """The drafting size in the unit of the greedy gap it is asked to explain, where that gap
    is per decode step (``oracle_gap.step_gap``: a lookup drafter, which the oracle simulates
    exactly on the same output). The replay's own figure is per step of the engine, whose steps
    overlap where a correct engine's accepted drafts would have covered them, so it overstates
    (1.5 to 2.1 times the gap on the prompt-lookup cases of the clinic). In the gap's unit the
    drafting loss is the per-step gap, less the share the replay put on verification
    (``Finding.recovered``: drafting's share of what the replay saw off a correct engine), with
    the gap's own interval scaled alike. Other findings, and every finding where the gap is
    per draft, are as found (pure)."""
    if gap is None or getattr(gap, "unit", "") != PER_STEP:
        return found
    out = []
    for f in found:
        size = f.size
        if (f.verdict is not Verdict.CONFIRMED or f.hypothesis not in DRAFTING or size is None
                or size.on != GREEDY):
            out.append(f)
            continue
        share = f.recovered if f.recovered is not None else 1.0
        lost = gap.oracle - gap.measured
        low = None if gap.low is None else gap.low * share
        high = None if gap.high is None else gap.high * share
        out.append(replace(f, size=Size(
            lost * share, low, high, GREEDY,
            f"the oracle's gap per decode step (the lookup run on the same output), "
            f"{share:.0%} of it drafting's by the replay (whose own figure, "
            f"{size.loss:+.3f} per step of the engine, counts steps a correct engine would "
            f"have skipped)")))
    return out


def _on(label: str) -> str:
    """The pass a replayed measurement label names (``greedy``, ``sampled 1.0,0.95``, ...)."""
    return GREEDY if label.startswith("greedy") else SAMPLED


def _drafting_findings(loc: Localisation, dra_bad: dict[str, DraftingCheck], lines: Any,
                       share: float) -> list[Finding]:
    """engine-drafting and rope-sync: drafts that differ are lost in drafting; the
    transformation that reproduces them names the mechanism (rope-sync for a position
    offset)."""
    comparable = bool(loc.drafting) and all(d.comparable for d in loc.drafting.values())
    worst = max(dra_bad, key=lambda k: dra_bad[k].loss, default=None)
    size = None if worst is None else dra_bad[worst].size(_on(worst))
    found = loc.mechanism()
    if found is not None:
        label, c, same = found
        t = c.transform
        also = (f" (as well reproduced by {', '.join(same)}: indistinguishable on these steps)"
                if same else "")
        head = f"[{label}] {loc.drafting[label].text()}; {c.text()}{also}"
        if t.hypothesis == "rope-sync":
            return [
                Finding("rope-sync", Verdict.CONFIRMED,
                        f"{head}: the engine runs its draft decode steps at rotary positions "
                        f"{c.offset:+d} from the tokens they draft (the positions it hands the "
                        f"drafter, not the served files)",
                        recovered=share, basis="replay", size=size, mechanism=t.id),
                Finding("engine-drafting", Verdict.INCONCLUSIVE,
                        f"the drafts differ from the drafter's chain, and a position offset of "
                        f"{c.offset:+d} reproduces them (rope-sync): {lines(dra_bad)}")]
        return [
            Finding("engine-drafting", Verdict.CONFIRMED,
                    f"{head}: lost in drafting; mechanism: {t.mechanism}",
                    recovered=share, basis="replay", size=size, mechanism=t.id),
            Finding("rope-sync", Verdict.EXCLUDED,
                    f"[{label}] the differing drafts are reproduced by '{t.mechanism}', "
                    f"which no position offset reproduces ({_tried(loc, 'positions')})",
                    basis="replay")]
    if dra_bad:
        tried = _tried(loc)
        return [
            Finding("engine-drafting", Verdict.CONFIRMED,
                    f"{lines(dra_bad)}: the engine verifies drafts its drafter does not propose "
                    f"on the same context: lost in drafting; mechanism not determined ("
                    + (f"tried, steps reproduced of those that differ: {tried}; "
                       + (f"{loc.transforms_note}; " if loc.transforms_note else "")
                       if tried else f"no transformation tried: "
                       f"{loc.transforms_note or 'not run'}; ")
                    + f"not tried: {', '.join(T.NOT_TRIED)}; the taps localise it further)",
                    recovered=share, basis="replay", size=size),
            Finding("rope-sync", Verdict.INCONCLUSIVE,
                    (f"no position offset reproduces the differing drafts "
                     f"({_tried(loc, 'positions')})" if tried else
                     f"the drafts differ; positions not shifted: "
                     f"{loc.transforms_note or 'not tried'}"))]
    if comparable:
        within = any(d.differ and not d.beyond_band for d in loc.drafting.values())
        return [Finding("engine-drafting", Verdict.EXCLUDED,
                        f"{lines(loc.drafting)}: "
                        + ("the engine's drafts differ from its drafter's no more than the "
                           "served precision alone makes them differ: numerics, not a drafting "
                           "loss" if within else "the engine's drafts are its drafter's own"),
                        basis="replay"),
                Finding("rope-sync", Verdict.EXCLUDED,
                        f"{lines(loc.drafting)}: the engine's drafts are its drafter's own at "
                        f"the positions of the tokens they draft", basis="replay")]
    return [Finding("engine-drafting", Verdict.INCONCLUSIVE,
                    "the drafts could not be compared with the drafter's on enough steps "
                    + "; ".join(f"[{k}] {d.text()}" for k, d in loc.drafting.items()))]


def _tried(loc: Localisation, family: str | None = None) -> str:
    """What the search tried, with the steps each reproduced (``family``: one family only)."""
    return "; ".join(f"[{k}] " + ", ".join(c.brief() for c in v
                                           if family is None or c.transform.family == family)
                     for k, v in loc.transforms.items())
