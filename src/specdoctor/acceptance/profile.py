"""AcceptanceProfile: the raw counters of speculative decoding and every figure derived from them.

Counters are the single source of truth; each derived figure names its convention once,
here, and nowhere else:

- ``drafts``: verification steps that carried a draft (vLLM's ``num_drafts``).
- ``draft_tokens``: draft tokens proposed over those steps.
- ``accepted_tokens``: draft tokens accepted by the verifier (the bonus token is NOT counted).
- ``accepted_per_position[i]``: drafts whose token at position i was accepted. Acceptance is
  prefix-closed, so position i counts only when 0..i-1 were accepted too.

Derived:

- ``mean_acceptance_length`` = 1 + accepted / drafts. Counts the bonus token, like vLLM's
  "Mean acceptance length" and SGLang's "accept len". Always >= 1.
- ``accepted_per_draft`` = accepted / drafts. Does NOT count the bonus token (how Case A's 0.75
  reads). Equals mean_acceptance_length - 1.
- ``acceptance_rate`` = accepted / draft_tokens, in 0..1.
- ``per_position[i]`` = accepted_per_position[i] / drafts: unconditional (vLLM's convention).
- ``per_position_conditional[i]`` = accepted_per_position[i] / accepted_per_position[i-1]
  (position 0: / drafts): the chance that position i is accepted given 0..i-1 were.

Some sources (SGLang's log lines) carry rates but no counts; such a profile keeps the reported
figures and ``count_weighted`` says whether aggregates could be weighted by counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Interval:
    """A two-sided 95% confidence interval, with how it was obtained."""

    low: float
    high: float
    method: str = "bootstrap"

    def to_json(self) -> list[float]:
        return [round(self.low, 6), round(self.high, 6)]


@dataclass(frozen=True)
class AcceptanceProfile:
    """Counters of one window, run or aggregate, with derived figures as properties.

    Any counter may be ``None`` when the source does not carry it and it cannot be recovered
    exactly (never guessed). ``k`` is the number of draft tokens per step (the configured
    maximum for variable-length drafters).
    """

    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    accepted_per_position: tuple[int, ...] | None = None
    k: int | None = None
    # Figures a source reported without counts (e.g. SGLang "accept len"); used only when the
    # counts are missing. Same conventions as the properties below.
    reported_mean_acceptance_length: float | None = None
    reported_acceptance_rate: float | None = None
    count_weighted: bool = True
    intervals: dict[str, Interval] = field(default_factory=dict, compare=False)
    notes: tuple[str, ...] = ()
    # When ``drafts`` is unknown but bounded: the lowest and highest draft counts consistent
    # with what the source printed (a range, never a guess presented as a count).
    drafts_range: tuple[int, int] | None = None
    # Why ``intervals`` is empty, when it is (too few units, units without counts).
    intervals_unavailable: str | None = field(default=None, compare=False)
    # Rate-only aggregates (SGLang windows): the lowest and highest mean acceptance length of
    # the windows averaged. The count-weighted mean of the run, which the lines cannot give,
    # lies between them (up to the windows' 2-decimal rounding).
    reported_mean_acceptance_length_range: tuple[float, float] | None = None

    # -- derived figures -------------------------------------------------------------------

    @property
    def accepted_per_draft(self) -> float | None:
        """Accepted draft tokens per drafting step, bonus token NOT counted."""
        if self.drafts and self.accepted_tokens is not None:
            return self.accepted_tokens / self.drafts
        if self.reported_mean_acceptance_length is not None and self.drafts is None:
            return self.reported_mean_acceptance_length - 1.0
        return None

    @property
    def mean_acceptance_length(self) -> float | None:
        """Tokens emitted per drafting step, bonus token counted (vLLM's figure)."""
        apd = self.accepted_per_draft
        return None if apd is None else 1.0 + apd

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / proposed draft tokens, 0..1."""
        if self.draft_tokens and self.accepted_tokens is not None:
            return self.accepted_tokens / self.draft_tokens
        if self.draft_tokens is None and self.reported_acceptance_rate is not None:
            return self.reported_acceptance_rate
        return None

    @property
    def per_position(self) -> list[float] | None:
        """Unconditional per-position rates: accepted at i / drafts."""
        if not self.drafts or self.accepted_per_position is None:
            return None
        return [a / self.drafts for a in self.accepted_per_position]

    @property
    def per_position_conditional(self) -> list[float | None] | None:
        """Rate at i given 0..i-1 accepted; None where the previous position never was."""
        if not self.drafts or self.accepted_per_position is None:
            return None
        out: list[float | None] = []
        prev = self.drafts
        for a in self.accepted_per_position:
            out.append(a / prev if prev else None)
            prev = a
        return out

    @property
    def drafts_bounds(self) -> tuple[int, int] | None:
        """(lowest, highest) draft count: the count twice when known, else ``drafts_range``."""
        return (self.drafts, self.drafts) if self.drafts is not None else self.drafts_range

    @property
    def mean_acceptance_length_range(self) -> tuple[float, float] | None:
        """The mean acceptance lengths the counts allow when the draft count is not known: from
        ``drafts_range``, or (rate-only windows) the lowest and highest window's."""
        if self.drafts is not None:
            return None
        if self.reported_mean_acceptance_length_range is not None:
            return self.reported_mean_acceptance_length_range
        r = self.drafts_range
        if r is None or self.accepted_tokens is None or r[0] <= 0:
            return None
        return (1.0 + self.accepted_tokens / r[1], 1.0 + self.accepted_tokens / r[0])

    @property
    def has_drafts(self) -> bool:
        return bool(self.drafts) or bool(self.draft_tokens)

    # -- combination -----------------------------------------------------------------------

    def with_intervals(self, intervals: dict[str, Interval], unavailable: str | None = None
                       ) -> AcceptanceProfile:
        """This profile with its 95% intervals, or (none) the reason there are none."""
        return replace(self, intervals=dict(intervals),
                       intervals_unavailable=None if intervals else unavailable)

    def to_json(self) -> dict[str, Any]:
        """The JSON form used by every command's ``total`` and ``windows``."""
        return {
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "k": self.k,
            "per_position": _round_list(self.per_position),
            "per_position_conditional": _round_list(self.per_position_conditional),
            "accepted_per_position": (
                list(self.accepted_per_position) if self.accepted_per_position is not None else None
            ),
            "mean_acceptance_length": _round(self.mean_acceptance_length),
            "accepted_per_draft": _round(self.accepted_per_draft),
            "acceptance_rate": _round(self.acceptance_rate),
            "count_weighted": self.count_weighted,
            "ci95": {name: iv.to_json() for name, iv in self.intervals.items()} or None,
            "ci95_unavailable": None if self.intervals else self.intervals_unavailable,
            "notes": list(self.notes),
            "drafts_range": list(self.drafts_range) if self.drafts is None and self.drafts_range else None,
            "mean_acceptance_length_range": _round_list(self.mean_acceptance_length_range),
        }


def _round(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def _round_list(xs: Sequence[float | None] | None) -> list[float | None] | None:
    return None if xs is None else [_round(x) for x in xs]


class ProfileSum:
    """Running sum of profiles in constant memory: ``add`` windows one at a time, then
    ``result()``. Same rules as ``sum_profiles``."""

    def __init__(self) -> None:
        self.n = 0
        self._drafts: int | None = 0
        self._drafts_lo: int | None = 0  # sums of each window's drafts_bounds
        self._drafts_hi: int | None = 0
        self._draft_tokens: int | None = 0
        self._accepted: int | None = 0
        self._per_pos: list[int] | None = []
        self._k: int | None = None
        self._notes: set[str] = set()
        self._rate_only: list[AcceptanceProfile] = []

    def add(self, p: AcceptanceProfile) -> None:
        """Add one window."""
        self.n += 1
        if not p.count_weighted:
            self._rate_only.append(p)
            return
        bounds = p.drafts_bounds or (None, None)
        self._accumulate(p.drafts, bounds[0], bounds[1], p.draft_tokens, p.accepted_tokens, p.k,
                         p.accepted_per_position, p.notes)

    def merge(self, other: ProfileSum) -> None:
        """Add everything ``other`` holds (the same result whichever is merged into which)."""
        self.n += other.n
        self._rate_only.extend(other._rate_only)
        self._accumulate(other._drafts, other._drafts_lo, other._drafts_hi, other._draft_tokens,
                         other._accepted, other._k, other._per_pos, other._notes)

    def _accumulate(self, drafts: int | None, lo: int | None, hi: int | None,
                    draft_tokens: int | None, accepted: int | None, k: int | None,
                    per_pos: Sequence[int] | None, notes: Iterable[str]) -> None:
        self._drafts = _add(self._drafts, drafts)
        self._drafts_lo = _add(self._drafts_lo, lo)
        self._drafts_hi = _add(self._drafts_hi, hi)
        self._draft_tokens = _add(self._draft_tokens, draft_tokens)
        self._accepted = _add(self._accepted, accepted)
        if k is not None:
            self._k = k if self._k is None else max(self._k, k)
        if self._per_pos is not None:
            if per_pos is None:
                self._per_pos = None
            else:
                self._per_pos.extend([0] * max(len(per_pos) - len(self._per_pos), 0))
                for i, a in enumerate(per_pos):
                    self._per_pos[i] += a
        self._notes.update(notes)

    def result(self) -> AcceptanceProfile:
        if self._rate_only:
            # Rate-only windows cannot be weighted; mixing them with counted ones is not either.
            return _mean_of_rates(self._rate_only)
        if self.n == 0:
            return AcceptanceProfile(0, 0, 0, None, None)
        return AcceptanceProfile(
            drafts=self._drafts,
            draft_tokens=self._draft_tokens,
            accepted_tokens=self._accepted,
            accepted_per_position=tuple(self._per_pos) if self._per_pos is not None else None,
            k=self._k,
            notes=tuple(sorted(self._notes)),
            drafts_range=(None if self._drafts is not None or self._drafts_lo is None
                          or self._drafts_hi is None else (self._drafts_lo, self._drafts_hi)),
        )


def _add(total: int | None, x: int | None) -> int | None:
    return None if total is None or x is None else total + x


def sum_profiles(profiles: Sequence[AcceptanceProfile]) -> AcceptanceProfile:
    """Aggregate windows by adding their counts, never by averaging their averages.

    A counter unknown in any window is unknown in the sum. Per-position counts of windows with
    different k are summed position by position (a missing position counts as zero accepted,
    which is exact: a draft shorter than i accepts nothing at i). When windows carry rates but
    no counts (rate-only sources), the reported figures are averaged with equal weight and the
    result is marked ``count_weighted=False``.
    """
    acc = ProfileSum()
    for p in profiles:
        acc.add(p)
    return acc.result()


def _mean_of_rates(profiles: Sequence[AcceptanceProfile]) -> AcceptanceProfile:
    mal = [p.mean_acceptance_length for p in profiles if p.mean_acceptance_length is not None]
    rate = [p.acceptance_rate for p in profiles if p.acceptance_rate is not None]
    spans = [p.mean_acceptance_length_range or (p.mean_acceptance_length,) * 2 for p in profiles
             if p.mean_acceptance_length is not None]
    return AcceptanceProfile(
        drafts=None,
        draft_tokens=None,
        accepted_tokens=None,
        k=next((p.k for p in profiles if p.k is not None), None),
        reported_mean_acceptance_length=sum(mal) / len(mal) if mal else None,
        reported_acceptance_rate=sum(rate) / len(rate) if rate else None,
        count_weighted=False,
        reported_mean_acceptance_length_range=(
            (min(s[0] for s in spans), max(s[1] for s in spans)) if len(spans) > 1 else None),
        notes=(
            "aggregate of rate-only windows: an unweighted mean of per-window rates, "
            "not weighted by draft counts (the source carries no counts)",
        ),
    )


def difference(after: AcceptanceProfile, before: AcceptanceProfile) -> AcceptanceProfile:
    """Counters of ``after`` minus ``before`` (cumulative counters → one run's delta).

    The caller checks for restarts first (see ``sources.prometheus.delta``); this function only
    subtracts and refuses negative results.
    """
    def sub(a: int | None, b: int | None) -> int | None:
        if a is None or b is None:
            return None
        if a < b:
            raise ValueError("counter went down: a restart between the two readings")
        return a - b

    per_pos: tuple[int, ...] | None = None
    if after.accepted_per_position is not None and before.accepted_per_position is not None:
        width = max(len(after.accepted_per_position), len(before.accepted_per_position))
        a_pos = list(after.accepted_per_position) + [0] * (width - len(after.accepted_per_position))
        b_pos = list(before.accepted_per_position) + [0] * (width - len(before.accepted_per_position))
        per_pos = tuple(sub(x, y) or 0 for x, y in zip(a_pos, b_pos))
    return AcceptanceProfile(
        drafts=sub(after.drafts, before.drafts),
        draft_tokens=sub(after.draft_tokens, before.draft_tokens),
        accepted_tokens=sub(after.accepted_tokens, before.accepted_tokens),
        accepted_per_position=per_pos,
        k=after.k if after.k is not None else before.k,
    )
