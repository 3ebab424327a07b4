"""What a greedy server will measure for a drafter, predicted without a server.

Under greedy verification a draft started after position p is accepted up to its first wrong
token, and the next draft starts right after the tokens this step produced (accepted + bonus).
So given, for every start p, how many leading drafts are right (``runs[p]``), the whole
sequence of verification steps of one request follows (``walk``); summing the steps gives the
counters vLLM keeps: drafts, draft tokens, accepted tokens per position.

Each drafter module computes ``runs`` for all starts in one batched forward (its own reference
forward, with the target's greedy text teacher-forced — exact for the leading right drafts,
which are all that greedy acceptance counts). Numbers can still differ from the server by the
float noise between transformers and vLLM kernels at near-tied logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from specdoctor.lab.drafters.targets import TargetData


def walk(runs: Sequence[int], start: int, k: int, max_tokens: int) -> list[int]:
    """Accepted draft tokens of each verification step of one greedy request.

    ``start``: the last prompt position (the prefill samples the first token and drafts from
    there); a step accepting ``a`` tokens produces ``a + 1``."""
    steps: list[int] = []
    produced, p = 1, start
    while produced < max_tokens and p < len(runs):
        a = min(int(runs[p]), k)
        steps.append(a)
        produced += a + 1
        p += a + 1
    return steps


@dataclass
class Counts:
    """vLLM's counters: drafts, draft tokens, accepted tokens at each draft position."""

    k: int
    drafts: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.accepted_per_position:
            self.accepted_per_position = [0] * self.k

    def add(self, accepted: int) -> None:
        self.drafts += 1
        for j in range(accepted):
            self.accepted_per_position[j] += 1

    @property
    def per_position(self) -> list[float]:
        """Unconditional per-position acceptance: accepted at position j / drafts."""
        return [a / self.drafts if self.drafts else 0.0 for a in self.accepted_per_position]

    @property
    def mean_acceptance_length(self) -> float:
        """Counting the bonus token (vLLM's convention)."""
        return 1 + sum(self.accepted_per_position) / self.drafts if self.drafts else 0.0


def profile(runs_fn: Callable[[TargetData, int], torch.Tensor], data: list[TargetData], k: int,
            max_tokens: int) -> Counts:
    """Offline counters over ``data`` (one request per row; its prompt = the first prompt_len
    ids). ``runs_fn(d, k)`` → [N, T] leading-right counts for every start position."""
    c = Counts(k)
    for d in data:
        for row in runs_fn(d, k).tolist():
            for a in walk(row, d.prompt_len - 1, k, max_tokens):
                c.add(a)
    return c


def predict(method: str, target: Path, draft: Path | None, prompts: list[str], k: int,
            max_tokens: int) -> Counts:
    """The counters a greedy lab server of (target, draft) should report for ``prompts``."""
    from specdoctor.lab.drafters import module, targets

    data = targets.prompt_data(target, prompts, max_tokens)
    return profile(module(method).runs_fn(target, draft), data, k, max_tokens)
