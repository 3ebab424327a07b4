"""Which target token each slot of a drafter's own vocabulary proposes, learned from its
proposals (pure).

An EAGLE3 head drafts in a vocabulary of its own; ``d2t`` names the target token behind each
slot. Whether ``d2t`` is the map the head was trained with cannot be read from the checkpoint
alone (a ``d2t`` regenerated from other data agrees with its own ``t2d`` and is still wrong).
It can be measured: where the head's first draft is slot ``s``, the token the target chooses
next is, for a head trained with the right map, most often the token ``d2t`` names for ``s``.
A map learned from (slot, next target token) pairs on some prompts, scored on held-out
prompts against the served map, says whether the served map sends the head's confident
proposals to the wrong tokens.

The test is paired, per held-out position: the served map right and the learned one wrong, or
the reverse (exact one-sided sign test on those discordant positions, McNemar's test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specdoctor.oracle.stats import binomial_tails

# A slot's learned target needs this many observations on the learning prompts, and the
# majority token at least this share of them; otherwise the slot keeps its served target.
MIN_COUNT = 2
MIN_SHARE = 0.5
# ... and its served target reached through it at most this share of the time.
MAX_SERVED_SHARE = 0.1
# One-sided p below which the learned map is better on held-out positions.
ALPHA = 0.01
# A gain in first-draft agreement that would matter: the served map is cleared when the
# learned one's held-out gain is below this share of positions at its upper 95% bound.
MARGIN = 0.02
Z95 = 1.645


@dataclass(frozen=True)
class SlotPairs:
    """One prompt's greedy positions: the head's first-draft slot and the target's next token."""

    prompt_index: int
    slots: np.ndarray       # int, draft-vocabulary ids
    nexts: np.ndarray       # int, target ids


def learn(pairs: Sequence[SlotPairs], served: np.ndarray,
          min_count: int = MIN_COUNT, min_share: float = MIN_SHARE) -> np.ndarray:
    """The target id behind each slot, from the pairs: the majority next token of a slot seen
    at least ``min_count`` times with that token in at least ``min_share`` of them, where the
    head reaches that token through this slot more often than through the slot the served map
    gives it, and whose served token is (almost) never reached through it; else the served one
    (``served``: target id per slot). A map that is not the head's moves whole slots: a moved
    slot is never right under the served map, and the token it was trained for is no longer
    reached through any other. A head that confuses two tokens is neither."""
    served = np.asarray(served, dtype=np.int64)
    learned = served.copy()
    if not pairs:
        return learned
    slots = np.concatenate([p.slots for p in pairs]).astype(np.int64)
    nexts = np.concatenate([p.nexts for p in pairs]).astype(np.int64)
    # how often each token is reached through the slot the served map gives it
    reached = served[slots] == nexts
    through_own = np.bincount(nexts[reached], minlength=int(nexts.max()) + 1)
    for s in np.unique(slots):
        got = nexts[slots == s]
        if len(got) < min_count:
            continue
        values, counts = np.unique(got, return_counts=True)
        best = int(np.argmax(counts))
        token, n = int(values[best]), int(counts[best])
        if n < min_count or n / len(got) < min_share or token == served[s]:
            continue
        # A slot the map moved is (almost) never right under it; a head that confuses two
        # tokens is still right through this slot at times, and reaches the other token
        # through its own slot more often than through this one: the head's error, not the
        # map's.
        right = int((got == served[s]).sum())
        if right <= MAX_SERVED_SHARE * len(got) and n > through_own[token]:
            learned[s] = token
    return learned


def hits(pairs: Sequence[SlotPairs], mapping: np.ndarray) -> np.ndarray:
    """Per position, whether ``mapping`` sends the slot to the token the target chose."""
    if not pairs:
        return np.zeros(0, dtype=bool)
    slots = np.concatenate([p.slots for p in pairs]).astype(np.int64)
    nexts = np.concatenate([p.nexts for p in pairs]).astype(np.int64)
    return np.asarray(mapping)[slots] == nexts


def sign_test(better: int, worse: int) -> float:
    """One-sided exact p of at least ``better`` successes in ``better + worse`` fair coin
    flips (1.0 when there is nothing to test)."""
    n = better + worse
    if n == 0:
        return 1.0
    return binomial_tails(better, n, 0.5)[1]


@dataclass(frozen=True)
class HeldOut:
    """The served map against the learned one on held-out positions."""

    positions: int
    served: int            # positions the served map gets right
    learned: int           # positions the learned map gets right
    better: int            # learned right, served wrong
    worse: int             # served right, learned wrong
    slots_changed: int     # slots whose learned target differs from the served one
    p: float

    @property
    def learned_better(self) -> bool:
        return self.p < ALPHA and self.learned > self.served

    @property
    def gain_upper(self) -> float:
        """Upper one-sided 95% bound of the learned map's gain, as a share of positions (normal
        approximation over the discordant positions, each +1 or -1)."""
        n = max(self.positions, 1)
        return (self.better - self.worse + Z95 * (self.better + self.worse) ** 0.5) / n

    @property
    def rules_out(self) -> bool:
        """The held-out positions leave no room for a gain that would matter (``MARGIN``)."""
        return self.positions > 0 and self.gain_upper < MARGIN

    def text(self) -> str:
        n = max(self.positions, 1)
        return (f"on {self.positions} held-out positions the head's first draft lands on the "
                f"target's token {self.served / n:.1%} of the time through the served d2t, "
                f"{self.learned / n:.1%} through a map learned from its proposals on the other "
                f"prompts ({self.slots_changed} slots changed; {self.better} positions gained, "
                f"{self.worse} lost, one-sided sign test p = {self.p:.2g}; gain at most "
                f"{self.gain_upper:+.1%} at 95%)")


def held_out(pairs: Sequence[SlotPairs], served: np.ndarray) -> tuple[HeldOut, np.ndarray]:
    """Learn on the even prompts, score on the odd ones; also the map learned from all prompts
    (for the counterfactual that measures what it recovers)."""
    learn_on = [p for p in pairs if p.prompt_index % 2 == 0]
    score_on = [p for p in pairs if p.prompt_index % 2 == 1]
    learned = learn(learn_on, served)
    s, lh = hits(score_on, served), hits(score_on, learned)
    better, worse = int((lh & ~s).sum()), int((s & ~lh).sum())
    h = HeldOut(len(s), int(s.sum()), int(lh.sum()), better, worse,
                int((learned != np.asarray(served)).sum()), sign_test(better, worse))
    return h, learn(pairs, served)
