"""The vocabulary fingerprint: is the drafter's disagreement with the target systematic? (pure)

Where a drafter's first draft and the target's choice differ, a drafter that is merely weak
spreads its misses over many tokens; a drafter whose ids mean other tokens than the engine's
misses the same way every time: draft id ``j`` stands for the token the target calls ``m(j)``.
``oracle.slotmap`` learns such a map from (first draft, target's token) pairs on half the
prompts and scores it on the other half; this module reads the pairs off a run of the oracle
(every step's first draft beside the token the target emitted there) and says what shape the
map it learned has: pairs swapped both ways, longer permutation cycles, a constant or
piecewise-constant offset, or a block of ids sent to one token.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from specdoctor.oracle.slotmap import SlotPairs


def pairs_from_traces(traces: Iterable[object]) -> list[SlotPairs]:
    """Per prompt, each step's first draft (in target ids, as the engine verifies it) beside
    the token the target emitted at that position (``oracle.simulate.RequestTrace``)."""
    by: dict[int, tuple[list[int], list[int]]] = {}
    for t in traces:
        slots, nexts = by.setdefault(int(t.prompt_index), ([], []))   # type: ignore[attr-defined]
        for s in t.steps:                                              # type: ignore[attr-defined]
            if s.drafts and s.emitted:
                slots.append(int(s.drafts[0]))
                nexts.append(int(s.emitted[0]))
    return [SlotPairs(i, np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
            for i, (a, b) in sorted(by.items())]


@dataclass(frozen=True)
class Shape:
    """What a learned map changes against the served one."""

    moved: dict[int, int]                 # draft id -> the target id it stands for
    swaps: tuple[tuple[int, int], ...]    # j <-> t: each stands for the other
    cycles: tuple[tuple[int, ...], ...]   # longer permutation cycles among moved ids
    offsets: tuple[tuple[int, int, int], ...]   # (first id, last id, offset) runs
    many_to_one: dict[int, tuple[int, ...]]     # target id -> the draft ids sent to it

    @property
    def systematic(self) -> bool:
        """Moved ids that follow a rule: a swap, a cycle, a run of one offset over several
        ids, or several ids sent to one token."""
        return bool(self.swaps or self.cycles or self.many_to_one
                    or any(b > a for a, b, _ in self.offsets))

    def text(self) -> str:
        if not self.moved:
            return "no id moved"
        parts = []
        if self.swaps:
            ex = ", ".join(f"{a}↔{b}" for a, b in self.swaps[:3])
            parts.append(f"{len(self.swaps)} pair(s) swapped both ways ({ex})")
        if self.cycles:
            ex = "→".join(str(x) for x in self.cycles[0])
            parts.append(f"{len(self.cycles)} permutation cycle(s) (e.g. {ex})")
        runs = [r for r in self.offsets if r[1] > r[0]]
        if runs:
            ex = ", ".join(f"ids {a}–{b} by {o:+d}" for a, b, o in runs[:3])
            parts.append(f"offset runs: {ex}")
        if self.many_to_one:
            t, ids = next(iter(self.many_to_one.items()))
            parts.append(f"{len(self.many_to_one)} token(s) reached from several ids (e.g. "
                         f"{', '.join(map(str, ids[:4]))} → {t})")
        return (f"{len(self.moved)} id(s) moved: " + "; ".join(parts) if parts
                else f"{len(self.moved)} id(s) moved, with no rule among them")


def shape(learned: Sequence[int], served: Sequence[int]) -> Shape:
    """The shape of ``learned`` against ``served`` (target id per draft id, both)."""
    lm, sv = np.asarray(learned, dtype=np.int64), np.asarray(served, dtype=np.int64)
    moved = {int(j): int(lm[j]) for j in np.flatnonzero(lm != sv)}
    # which draft id the served map gives each target id (for swaps and cycles)
    owner = {int(t): int(j) for j, t in enumerate(sv)}
    swaps: list[tuple[int, int]] = []
    cycles: list[tuple[int, ...]] = []
    seen: set[int] = set()
    for j in sorted(moved):
        if j in seen:
            continue
        path, x = [j], j
        while True:
            nxt = owner.get(moved[x]) if x in moved else None
            if nxt is None or nxt not in moved or nxt in path:
                break
            path.append(nxt)
            x = nxt
        closes = x in moved and owner.get(moved[x]) == j
        if closes and len(path) == 2:
            swaps.append((path[0], path[1]))
            seen.update(path)
        elif closes and len(path) > 2:
            cycles.append(tuple(path))
            seen.update(path)
    offsets: list[tuple[int, int, int]] = []
    for j in sorted(moved):
        o = moved[j] - int(sv[j])
        if offsets and offsets[-1][1] == j - 1 and offsets[-1][2] == o:
            offsets[-1] = (offsets[-1][0], j, o)
        else:
            offsets.append((j, j, o))
    targets: dict[int, list[int]] = {}
    for j, t in moved.items():
        targets.setdefault(t, []).append(j)
    many = {t: tuple(ids) for t, ids in targets.items() if len(ids) > 1}
    return Shape(moved, tuple(swaps), tuple(cycles), tuple(offsets), many)


def one_to_one(mapping: Sequence[int]) -> tuple[list[int], list[int]]:
    """A learned draft-to-target map made one-to-one, as a vocabulary map must be (pure).

    Where several draft ids land on one target id, the id that maps to itself keeps it (else
    the lowest); the others become unmapped (-1). A remapped block's edge collides so (a block
    shifted by one sends its last id onto the next, unmoved id), and so do a weak drafter's
    confusions (it proposes 72 where the target says 86, and 72 where the target says 72):
    those are not a map at all. Returns the map and the draft ids unmapped."""
    keep: dict[int, int] = {}
    for d, t in enumerate(mapping):
        if t < 0:
            continue
        held = keep.get(t)
        if held is None or (d == t and held != t):
            keep[t] = d
    out = [t if t >= 0 and keep.get(t) == d else -1 for d, t in enumerate(mapping)]
    dropped = [d for d, t in enumerate(mapping) if t >= 0 and out[d] < 0]
    return out, dropped
