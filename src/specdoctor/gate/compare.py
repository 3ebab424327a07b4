"""Is the candidate worse than the baseline, beyond noise? The gate's comparison, pure.

Per cell (prompt set × sampling × concurrency), the figures tested are:

- ``mean_acceptance_length`` (bonus token counted) and ``per_position[i]`` (unconditional:
  accepted at i / drafts) for every position where the baseline accepts in at least
  ``MIN_POSITION_RATE`` of its drafts (rarer positions are reported, not gated); their 95%
  intervals are the project's own bootstrap over requests
  (``acceptance.bootstrap.bootstrap_intervals``);
- ``speedup``: tok/s with speculation ÷ tok/s with it off, where the baseline has a spec-off
  measurement; each tok/s interval is ``bench.stats.spread`` (the mean per-stream tok/s
  interval, or the min..max over repeats), the ratio's is combined on the log scale.

Acceptance figures are tested **paired** where the two runs sent the same prompts (their
request keys say which prompt and seed each request had): a sign-flip permutation test over
the prompts (``gate.paired``, where the choice of test is argued). Where they cannot be paired
(no keys, a request without counts, or so few prompts that no swap pattern can reach Holm's
strictest level), and for the speedup (tok/s is per cell, not per prompt), the test is the
unpaired one below, and each test says which it was (``Test.method``).

The unpaired test of one figure is two-sided, on the difference candidate − baseline, built
from the two intervals by MOVER (Zou & Donner 2008, "the method of variance estimates recovery"): the
half of each interval that faces the other value is that side's 1.96 standard errors, so a
skewed interval counts on the side that matters, and the p-value is normal-theory. Two
intervals that overlap can still differ significantly, and the test says so; overlap is never
the criterion.

Many figures are tested at once (cells × positions × figures), so the gate controls the
family-wise false-alarm rate: Holm's step-down over every test of the gate at ``alpha``. A
figure *regressed* when its drop is significant after Holm and larger than ``max_drop``
relative to the baseline; a significant drop within ``max_drop`` passes, named as such; a
difference that is not significant is "within noise". ``sensitivity`` adds, per tested
figure, the smallest drop the gate would have called (``Sensitivity``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from specdoctor.acceptance.bootstrap import bootstrap_intervals
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.bench.stats import Spread
from specdoctor.gate import paired
from specdoctor.gate.paired import RequestKey

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
ALPHA = 0.05
MAX_DROP = 0.05

REGRESSED = "regressed"
DROP_ALLOWED = "within the allowed drop"
NOISE = "within noise"
IMPROVED = "improved"
UNTESTED = "not tested"
RARE = "not gated (rare)"
# A per-position rate is gated only where the baseline accepts at that position in at least
# this share of its drafts. Below it, a cell's 16 requests hold a handful of accepted tokens
# there, often none: the bootstrap interval of a rate with no event in the sample has no width
# (0 [0, 0]), so any event on the other side would read as significant. Such positions weigh
# little in the mean acceptance length (which is always gated) and are reported, not gated.
MIN_POSITION_RATE = 0.05
CHANGED = "the gate called a change there"  # why no smallest drop is measured for a figure


@dataclass(frozen=True)
class Estimate:
    """A figure and its two-sided 95% interval (``None``: no interval)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def to_json(self) -> dict[str, Any]:
        return {"value": _r(self.value), "ci95": [_r(self.low), _r(self.high)]
                if self.has_interval else None}


@dataclass(frozen=True)
class CellSample:
    """One side of one cell: what the gate compares.

    ``units``: the per-request profiles (the bootstrap's units), ``None`` when the server sends
    no per-request metrics; ``profile``: the cell's totals; ``tok_s`` and ``spec_off_tok_s``:
    the aggregate tok/s of the speculative server and of the same server with speculation off,
    each with its spread."""

    cell: str
    k: int | None
    units: tuple[AcceptanceProfile, ...] | None
    profile: AcceptanceProfile | None
    tok_s: Spread | None = None
    spec_off_tok_s: Spread | None = None
    # which prompt and seed each of ``units`` had (same order); None: not known (a baseline
    # file written before they were stored), and the gate tests this cell unpaired
    keys: tuple[RequestKey, ...] | None = None


PAIRED = "paired"
UNPAIRED = "unpaired"


@dataclass(frozen=True)
class Method:
    """How one figure was tested: ``paired`` (sign-flip over the prompts both runs sent, see
    ``gate.paired``) or ``unpaired`` (MOVER from the two intervals), with the number of pairs,
    whether the two runs used the same seeds (replayed streams), and why not paired."""

    name: str
    pairs: int | None = None
    same_seeds: bool | None = None
    why: str | None = None

    def describe(self) -> str:
        if self.name == PAIRED:
            return f"paired over {self.pairs} prompts"
        return "unpaired"

    def to_json(self) -> dict[str, Any]:
        return {"method": self.name, "pairs": self.pairs, "same_seeds": self.same_seeds,
                "why_unpaired": self.why}


UNPAIRED_SPEED = Method(UNPAIRED, why="tok/s is measured per cell, not per prompt")


@dataclass(frozen=True)
class Test:
    """One figure of one cell, baseline against candidate."""

    cell: str
    figure: str  # mean_acceptance_length | per_position[i] | speedup
    base: Estimate | None
    cand: Estimate | None
    p: float | None = None
    threshold: float | None = None  # Holm's level for this test's rank
    outcome: str = UNTESTED
    why: str | None = None  # why untested
    lacking: str | None = None  # the side that lacks the figure or its interval, if untested
    method: Method = Method(UNPAIRED)
    paired_p: float | None = field(default=None, repr=False)  # the paired test's p, before Holm

    @property
    def position(self) -> int | None:
        if self.figure.startswith("per_position["):
            return int(self.figure[len("per_position["):-1])
        return None

    @property
    def change(self) -> float | None:
        """(candidate − baseline) / baseline; None without both values or at a zero baseline."""
        if self.base is None or self.cand is None or self.base.value == 0:
            return None
        return (self.cand.value - self.base.value) / self.base.value

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "figure": self.figure, "position": self.position,
                "baseline": self.base.to_json() if self.base else None,
                "candidate": self.cand.to_json() if self.cand else None,
                "change": _r(self.change), "p": _r(self.p, 8),
                "holm_threshold": _r(self.threshold, 8), "outcome": self.outcome,
                "test": self.method.to_json(), "why": self.why, "lacking": self.lacking}


@dataclass(frozen=True)
class Sensitivity:
    """The smallest drop of one figure of one cell that this gate would have called: injected
    into the candidate's measurement (acceptance: its accepted counts scaled down evenly in
    every request; speedup: its tok/s), tested as the figure was, at Holm's strictest level
    (alpha / number of tests). ``drop``: relative to the figure, on ``paired.DROP_GRID``;
    ``None`` with ``why`` when no drop on the grid is called."""

    cell: str
    figure: str
    drop: float | None
    level: float
    method: Method
    why: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "figure": self.figure, "drop": self.drop,
                "level": _r(self.level, 8), "test": self.method.to_json(), "why": self.why}


@dataclass(frozen=True)
class Comparison:
    tests: list[Test]
    alpha: float
    max_drop: float
    missing: list[str] = field(default_factory=list)  # baseline cells the candidate lacks
    mismatches: list[str] = field(default_factory=list)  # cells whose k differs
    sensitivity: list[Sensitivity] = field(default_factory=list)

    @property
    def tested(self) -> list[Test]:
        return [t for t in self.tests if t.p is not None]

    @property
    def regressions(self) -> list[Test]:
        return [t for t in self.tests if t.outcome == REGRESSED]

    @property
    def passed(self) -> bool:
        return not self.regressions

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "alpha": self.alpha, "max_drop": self.max_drop,
                "correction": "holm", "tests_run": len(self.tested),
                "regressions": [t.to_json() for t in self.regressions],
                "tests": [t.to_json() for t in self.tests], "missing_cells": self.missing,
                "k_mismatches": self.mismatches,
                "sensitivity": [x.to_json() for x in self.sensitivity]}


# ---- estimates ---------------------------------------------------------------------------

@lru_cache(maxsize=256)
def acceptance_estimates(s: CellSample) -> dict[str, Estimate]:
    """Mean acceptance length and per-position rates of a cell, with the bootstrap's 95%
    intervals over its requests (none below the bootstrap's minimum number of requests).
    Cached: a baseline's cells are compared with many candidates (do not mutate the result)."""
    if s.units:
        total = sum_profiles(s.units)
        ivs = bootstrap_intervals(s.units)
    elif s.profile is not None:
        total, ivs = s.profile, {}
    else:
        return {}
    out: dict[str, Estimate] = {}
    names = [("mean_acceptance_length", total.mean_acceptance_length)]
    names += [(f"per_position[{i}]", v) for i, v in enumerate(total.per_position or [])]
    for name, value in names:
        if value is None:
            continue
        iv = ivs.get(name)
        out[name] = Estimate(value, iv.low, iv.high) if iv else Estimate(value)
    return out


def speedup_estimate(spec: Spread | None, off: Spread | None) -> Estimate | None:
    """tok/s with speculation ÷ tok/s without, with an interval combined on the log scale
    from the two spreads (MOVER on log tok/s); ``None`` without both."""
    if spec is None or off is None or spec.value <= 0 or off.value <= 0:
        return None
    value = spec.value / off.value
    if "none" in (spec.basis, off.basis) or min(spec.low, off.low) <= 0:
        return Estimate(value)
    ls, lo = math.log(spec.value), math.log(off.value)
    down = math.hypot(ls - math.log(spec.low), math.log(off.high) - lo)
    up = math.hypot(math.log(spec.high) - ls, lo - math.log(off.low))
    return Estimate(value, value * math.exp(-down), value * math.exp(up))


# ---- the test ----------------------------------------------------------------------------

def mover_p(base: Estimate, cand: Estimate, log_scale: bool = False) -> float:
    """Two-sided p-value of candidate − baseline = 0, from the two 95% intervals (MOVER).

    For a drop, the baseline's lower half-interval and the candidate's upper one face each
    other; for a rise, the other two. Each half is taken as 1.96 standard errors of its side.
    ``log_scale``: test the difference of logarithms (ratios such as a speedup)."""
    if not (base.has_interval and cand.has_interval):
        raise ValueError("mover_p needs both intervals")
    f = math.log if log_scale else float
    b, bl, bh = f(base.value), f(base.low), f(base.high)  # type: ignore[arg-type]
    c, cl, ch = f(cand.value), f(cand.low), f(cand.high)  # type: ignore[arg-type]
    d = c - b
    if d == 0:
        return 1.0
    if d < 0:
        se = math.hypot(max(b - bl, 0.0), max(ch - c, 0.0)) / Z95
    else:
        se = math.hypot(max(bh - b, 0.0), max(c - cl, 0.0)) / Z95
    if se == 0:
        return 0.0
    return math.erfc(abs(d) / se / math.sqrt(2.0))


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[tuple[bool, float]]:
    """Holm's step-down at family-wise rate ``alpha``: per test (in the order given), whether
    it is rejected and the level its rank was held to (alpha / (m − rank))."""
    m = len(pvalues)
    out: list[tuple[bool, float]] = [(False, alpha)] * m
    going = True
    for rank, i in enumerate(sorted(range(m), key=lambda j: pvalues[j])):
        level = alpha / (m - rank)
        going = going and pvalues[i] <= level
        out[i] = (going, level)
    return out


# ---- the comparison ----------------------------------------------------------------------

def compare(base: Sequence[CellSample], cand: Sequence[CellSample], *, alpha: float = ALPHA,
            max_drop: float = MAX_DROP, speed: bool = True, paired_test: bool = True,
            sensitivity: bool = False) -> Comparison:
    """Every figure of every baseline cell against the candidate's, one Holm family.

    ``speed``: also test the speedup over spec-off where both sides have one; ``paired_test``:
    test acceptance pair by pair over the prompts both runs sent (``gate.paired``) where the
    two cells' request keys allow it, else (or when off) unpaired; ``sensitivity``: also
    measure the smallest drop each tested figure would have been called at."""
    if not 0 < alpha < 1 or not 0 <= max_drop < 1:
        raise ValueError(f"alpha {alpha} must be in (0, 1) and max_drop {max_drop} in [0, 1)")
    by_name = {c.cell: c for c in cand}
    pending: list[Test] = []
    missing, mismatches = [], []
    for b in base:
        c = by_name.get(b.cell)
        if c is None:
            missing.append(b.cell)
            continue
        if b.k is not None and c.k is not None and b.k != c.k:
            mismatches.append(f"{b.cell}: k {b.k} → {c.k}")
            continue
        pending.extend(_cell_tests(b, c, speed, paired_test))
    testable = [i for i, t in enumerate(pending) if t.why is None and t.outcome == UNTESTED]
    # By design, before any p is looked at: a cell with so few prompts that no swap pattern
    # can reach Holm's strictest level (8 prompts: 2 / 2^8 = 0.0078 > 0.05 / 11) is tested
    # unpaired, so the gate keeps the power it had there.
    strictest = alpha / max(len(testable), 1)
    for i in testable:
        t = pending[i]
        if t.method.name == PAIRED and t.method.pairs is not None and \
                paired.smallest_p(t.method.pairs) > strictest:
            pending[i] = replace(t, paired_p=None, method=Method(
                UNPAIRED, why=f"{t.method.pairs} prompts: the paired test's smallest p "
                              f"({paired.smallest_p(t.method.pairs):.2g}) is above Holm's "
                              f"strictest level ({strictest:.2g})"))
    ps = [_p(pending[i]) for i in testable]
    decided = dict(zip(testable, holm(ps, alpha)))
    tests = []
    for i, t in enumerate(pending):
        if i not in decided:
            tests.append(t)
            continue
        rejected, level = decided[i]
        p = ps[testable.index(i)]
        tests.append(replace(t, p=p, threshold=level, outcome=_outcome(t, rejected, max_drop)))
    sens: list[Sensitivity] = []
    if sensitivity and ps:
        strictest = alpha / len(ps)
        cells = {b.cell: b for b in base}
        cands = {c.cell: c for c in cand}
        # measured where the candidate is within noise; where the gate called a change, a
        # drop injected on top of it would say nothing about this gate's reach
        sens = [_sensitivity(t, cells[t.cell], cands[t.cell], strictest) if t.outcome == NOISE
                else Sensitivity(t.cell, t.figure, None, strictest, t.method, CHANGED)
                for t in tests if t.p is not None]
    return Comparison(tests, alpha, max_drop, missing, mismatches, sens)


@lru_cache(maxsize=256)
def cell_pairs(b: CellSample, c: CellSample) -> tuple[paired.Pairs | None, str | None]:
    """The units both sides of a cell have, paired by prompt; or None and why not."""
    for side, s in (("baseline", b), ("candidate", c)):
        if s.keys is None or not s.units:
            return None, (f"the {side} does not say which prompt each request had (a baseline "
                          "file exported before request keys were stored: export it again)"
                          if s.units else f"the {side} has no per-request metrics")
    assert b.units is not None and c.units is not None
    gb, gc = paired.group(b.units, b.keys or ()), paired.group(c.units, c.keys or ())
    if gb is None or gc is None:
        return None, "a request without counts"
    pairs = paired.pair(gb, gc)
    if pairs.n < paired.MIN_PAIRS:
        return None, (f"{pairs.n} prompts in both runs, under the {paired.MIN_PAIRS} a "
                      "paired test needs")
    return pairs, None


def _cell_tests(b: CellSample, c: CellSample, speed: bool, paired_test: bool) -> list[Test]:
    eb, ec = acceptance_estimates(b), acceptance_estimates(c)
    pairs, why = cell_pairs(b, c) if paired_test else (None, "the paired test was turned off")
    method = (Method(PAIRED, pairs.n, pairs.same_seeds) if pairs is not None
              else Method(UNPAIRED, why=why))
    out = []
    for name, est in eb.items():
        if name.startswith("per_position[") and est.value < MIN_POSITION_RATE:
            out.append(Test(b.cell, name, est, ec.get(name), outcome=RARE,
                            why=f"the baseline accepts there in under "
                                f"{MIN_POSITION_RATE:.0%} of its drafts"))
            continue
        out.append(replace(_pair(b.cell, name, est, ec.get(name)), method=method))
    if pairs is not None:
        ps = paired.sign_flip_ps(pairs, [t.figure for t in out if t.why is None])
        out = [replace(t, paired_p=ps[t.figure]) if t.figure in ps else t for t in out]
    if speed and b.spec_off_tok_s is not None:
        out.append(replace(_pair(b.cell, "speedup",
                                 speedup_estimate(b.tok_s, b.spec_off_tok_s),
                                 speedup_estimate(c.tok_s, c.spec_off_tok_s)),
                           method=UNPAIRED_SPEED))
    return out


def _sensitivity(t: Test, b: CellSample, c: CellSample, level: float) -> Sensitivity:
    """The smallest drop of ``t``'s figure this cell would have been called at ``level``: the
    candidate moved to the baseline's value minus the drop (``paired.smallest_drop``; for the
    unpaired test, its estimate and interval scaled alike)."""
    assert t.base is not None and t.cand is not None
    if t.method.name == PAIRED:
        pairs, _ = cell_pairs(b, c)
        assert pairs is not None
        drop = paired.smallest_drop(pairs, t.figure, level)
    else:
        drop = next((x for x in paired.DROP_GRID
                     if (e := _moved(t.base, t.cand, x, t.figure)) is not None
                     and mover_p(t.base, e, log_scale=t.figure == "speedup") <= level), None)
    why = None
    if drop is None:
        mean = t.figure == "mean_acceptance_length"
        why = ("the candidate accepts nothing there" if t.cand.value <= (1.0 if mean else 0.0)
               else "no drop on the grid was called")
    return Sensitivity(t.cell, t.figure, drop, level, t.method, why)


def _moved(base: Estimate, cand: Estimate, x: float, figure: str) -> Estimate | None:
    """The candidate's estimate, interval and all, scaled so its value is the baseline's minus
    ``x``: a rate or speedup scaled whole; the mean acceptance length 1 + a by its accepted
    part a. None where no scaling gets there."""
    assert cand.low is not None and cand.high is not None
    off = 1.0 if figure == "mean_acceptance_length" else 0.0
    target = base.value * (1 - x) - off
    if cand.value - off <= 0 or target < 0:
        return None
    s = target / (cand.value - off)
    return Estimate(off + (cand.value - off) * s, off + (cand.low - off) * s,
                    off + (cand.high - off) * s)


def _pair(cell: str, figure: str, base: Estimate | None, cand: Estimate | None) -> Test:
    why = side = None
    if base is None or cand is None:
        side = "baseline" if base is None else "candidate"
        why = f"the {side} has no {figure}"
    elif not base.has_interval or not cand.has_interval:
        side = "baseline" if not base.has_interval else "candidate"
        why = (f"the {side} has no 95% interval for it (fewer requests than the bootstrap "
               "needs, or no per-request metrics)")
    return Test(cell, figure, base, cand, why=why, lacking=side)


def _p(t: Test) -> float:
    assert t.base is not None and t.cand is not None
    if t.paired_p is not None:
        return t.paired_p
    return mover_p(t.base, t.cand, log_scale=t.figure == "speedup")


def _outcome(t: Test, significant: bool, max_drop: float) -> str:
    assert t.base is not None and t.cand is not None
    if not significant:
        return NOISE
    if t.cand.value > t.base.value:
        return IMPROVED
    change = t.change
    return REGRESSED if change is None or -change > max_drop else DROP_ALLOWED


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)
