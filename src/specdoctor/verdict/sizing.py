"""How much of the loss a confirmed cause explains (pure).

A cause is named as the root cause only for the loss it accounts for. Each experiment that
confirms a cause states what the cause is worth in the unit the symptom is measured in,
accepted draft tokens per step (``Size``): a counterfactual the gain of its change (after minus
before, with the paired interval over prompts where the prompts were measured one by one), the
replay the acceptance a correct verifier gives the drafter's own chain minus what it gives the
engine's drafts (drafting), or the engine's accepted count against the correct verifier's
expected count (verification), with an interval over the replayed steps, a verdict patch
the distance to the oracle it closed, and a drafter the engine's own check refused (so nothing
was drafted) every token the oracle of the served files has accepted. A speed cause (the
draft's own cost) is sized in the unit its symptom is measured in, the throughput with
speculation on as a share of speculation off (``SPEED``): the slowdown that stays with the best
acceptance known for the method, against the whole slowdown.

The loss it is asked to explain (``Asked``) is the gap from the measured acceptance up to the
best reference available for the same pass: the oracle of the served files, or the acceptance
a confirmed counterfactual recovered, whichever is higher. A published figure is not used: it
was measured on other weights, so what it leaves unexplained here is not a loss of this server.

``standing`` applies the rule ``cause-sized``: a cause whose interval reaches zero (or whose
loss is not a loss at all: a drafting difference that a correct verifier rewards no less)
explains less than the noise; one under ``MATERIAL`` of the acceptance is inside the band the
signature itself tolerates; one that explains under ``MIN_SHARE`` of a gap while the rest of
the gap is beyond the noise explains too little; and under a healthy signature, a cause found
on a pass within the noise of its reference has nothing to explain. Each is reported as "also
found", never as the root cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIN_SHARE = 0.25   # of the asked gap: below it a cause is "also found" while the rest is beyond noise
MATERIAL = 0.05    # of the reference acceptance: a smaller loss is inside the band the signature
                   # itself tolerates ("within 5%"), so it cannot be what made a symptom
GREEDY = "greedy"
SAMPLED = "sampled"
SPEED = "speed"      # the pass of a speed cause: throughput on over off, not acceptance
ACCEPTED = "accepted per step"
THROUGHPUT = "of spec-off throughput"
PER_DRAFT = "accepted per draft"        # the unit of an acceptance gap
PER_STEP = "accepted per decode step"   # ... for a drafter that does not draft at every step


@dataclass(frozen=True)
class Size:
    """Accepted draft tokens per step a cause accounts for, on the pass ``on`` (greedy or
    sampled), with a 95% interval where the experiment could give one, and how it was sized."""

    loss: float
    low: float | None = None
    high: float | None = None
    on: str = GREEDY
    how: str = ""
    # the gap this loss is measured against where it is not the pass's own (``asked_for``): a
    # weak drafter meets its oracle, so its loss is against what the method reaches at this k
    against: Asked | None = None
    unit: str = ACCEPTED

    @property
    def within_noise(self) -> bool:
        """No loss, or one whose interval reaches zero."""
        return self.loss <= 0.0 or (self.low is not None and self.low <= 0.0)

    def text(self) -> str:
        iv = "" if self.low is None else f", 95% [{self.low:+.3f}, {self.high:+.3f}]"
        return f"{self.loss:+.3f} {self.unit}{iv} ({self.how})" if self.how else \
            f"{self.loss:+.3f} {self.unit}{iv}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": round(self.loss, 4), "unit": self.unit}
        if self.unit == ACCEPTED:
            out["accepted_per_step"] = out["loss"]
        return {**out, "interval": None if self.low is None else [round(self.low, 4),
                                                                  round(self.high or 0.0, 4)],
                "on": self.on, "how": self.how}


@dataclass(frozen=True)
class Asked:
    """The loss the answer is asked to explain on one pass: ``reference`` minus ``measured``
    (accepted per draft), the reference's name, and the 95% interval of the gap where known."""

    measured: float
    reference: float
    against: str
    low: float | None = None
    high: float | None = None
    # the gap was shown by an experiment (a counterfactual confirmed it over the prompts)
    shown: bool = False
    unit: str = PER_DRAFT

    @property
    def gap(self) -> float:
        return abs(self.reference - self.measured)

    def beyond_noise(self, rest: float) -> bool:
        """Whether ``rest`` of the gap is more than its interval allows to be chance."""
        if rest <= 0.0:
            return False
        if self.shown and rest >= self.gap:
            return True
        if self.low is not None and self.high is not None:
            half = max(self.high - self.low, 0.0) / 2
            return rest > half
        return rest > 0.05 * max(self.reference, 0.1)

    def to_json(self) -> dict[str, Any]:
        return {"measured": round(self.measured, 4), "reference": round(self.reference, 4),
                "against": self.against, "gap": round(self.gap, 4), "unit": self.unit,
                "interval": None if self.low is None else [round(self.low, 4),
                                                           round(self.high or 0.0, 4)]}


def shortfall(measured: float, reference: float, against: str, how: str,
              low: float | None = None, high: float | None = None) -> Size:
    """A loss that is the whole distance from ``measured`` up to ``reference`` (both accepted
    per draft), measured against that same pair (``against`` names the reference): what a
    fresh restart, concurrency 1, a first pass or the method's figure has over what was
    served (pure)."""
    return Size(reference - measured, low, high, how=how,
                against=Asked(measured, reference, against))


def asked(measured: float, oracle: float | None, gains: tuple[tuple[str, float], ...] = (),
          oracle_low: float | None = None, oracle_high: float | None = None,
          against: str = "the oracle of the served files", unit: str = PER_DRAFT
          ) -> Asked | None:
    """The gap to explain on one pass: to the oracle, or the largest gain a confirmed
    counterfactual showed (``gains``: (what, accepted per draft gained)), the larger. A
    counterfactual on the drafter's files moves acceptance the oracle cannot see (it reads the
    same files), so its gain counts beside the oracle's gap, not inside it."""
    refs: list[Asked] = []
    if oracle is not None:
        refs.append(Asked(measured, oracle, against, oracle_low, oracle_high, unit=unit))
    refs += [Asked(measured, measured + g, f"what {name} recovered", shown=True)
             for name, g in gains if g > 0]
    return max(refs, key=lambda a: a.gap) if refs else None


@dataclass(frozen=True)
class Standing:
    """Whether a confirmed cause may be the root cause, its share of the gap, and why not."""

    root: bool
    share: float | None
    why: str = ""


def asked_for(size: Size | None, asked: Mapping[str, Asked]) -> Asked | None:
    """The gap ``size`` is measured against: its own (``Size.against``), else its pass's."""
    if size is None:
        return None
    return size.against if size.against is not None else asked.get(size.on)


def share_of(size: Size, ask: Asked | None) -> float | None:
    """The share of the asked gap ``size`` explains (None: no gap to share)."""
    return None if ask is None or ask.gap <= 0 else size.loss / ask.gap


def standing(size: Size | None, ask: Asked | None, quiet: bool = False,
             flagged: frozenset[str] | tuple[str, ...] = ()) -> Standing:
    """Rule ``cause-sized`` for one confirmed cause: unsized causes (speed, a rule) keep their
    standing, with no share. ``quiet``: the signature needs no cause (healthy). ``flagged``:
    the passes whose acceptance the signature itself called low; there a loss under
    ``MATERIAL`` is not inside a band the signature tolerated, since it did not."""
    if size is None:
        return Standing(True, None)
    share = share_of(size, ask)
    if size.within_noise:
        return Standing(False, share, f"it explains {size.text()}: no more than the noise")
    if ask is not None and size.loss < MATERIAL * ask.measured and size.on not in flagged:
        return Standing(False, share, (
            f"it explains {size.text()}, under {MATERIAL:.0%} of the {size.on} {_what(size)} "
            f"as served ({ask.measured:.3f} {ask.unit}): inside the band the signature itself "
            f"tolerates"))
    if quiet and ask is not None and not ask.beyond_noise(ask.gap):
        return Standing(False, share, (
            f"it explains {size.text()}, but the signature is healthy and the {size.on} "
            f"{_what(size)} ({ask.measured:.3f} {ask.unit}) is within the noise of {ask.against} "
            f"({ask.reference:.3f}): there is no loss on this pass for it to explain"))
    if ask is None or share is None:
        return Standing(True, share)
    rest = ask.gap - size.loss
    if share < MIN_SHARE and ask.beyond_noise(rest):
        return Standing(False, share, (
            f"it explains {size.text()}, {share:.0%} of the gap of {ask.gap:.3f} to "
            f"{ask.against}, and the other {rest:.3f} is beyond the noise"))
    return Standing(True, share)


def _what(size: Size) -> str:
    return "acceptance" if size.unit == ACCEPTED else "throughput"


def explains_json(size: Size | None, ask: Asked | None) -> dict[str, Any] | None:
    """``root_cause_explains`` and each ``other_causes_explain`` entry of the answer."""
    if size is None:
        return None
    share = share_of(size, ask)
    out = size.to_json()
    out["share_of_gap"] = None if share is None else round(share, 4)
    out["gap"] = None if ask is None else ask.to_json()
    return out
