"""Prompt-lookup (n-gram) drafting, simulated: the same proposals vLLM's ``NgramProposer`` makes.

vLLM (vllm/v1/spec_decode/ngram_proposer.py, ``_find_longest_matched_ngram_and_propose_tokens``)
looks for the longest n-gram, n in [min_n, max_n], that ends the context and occurs earlier in
it; among occurrences of that longest length it takes the EARLIEST one, and proposes up to k
tokens that follow it (fewer if the context ends first, none past ``max_model_len``). It runs
a capped KMP over the reversed context; this is the same search written plainly, O(len * max_n),
which is nothing next to a model's forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence


def propose(tokens: Sequence[int], min_n: int, max_n: int, k: int,
            max_model_len: int | None = None) -> list[int]:
    """The draft vLLM's prompt lookup proposes after ``tokens`` (possibly empty)."""
    total = len(tokens)
    if total < min_n:
        return []
    if max_model_len is not None:
        k = min(k, max_model_len - total)
    if k <= 0:
        return []
    rev = list(reversed(tokens))
    longest, position = 0, 0
    for i in range(1, total):
        # Longest v <= max_n such that the context's last v tokens also end at reversed index i,
        # i.e. rev[0:v] == rev[i+1-v : i+1], with v <= i (a proper occurrence).
        m = 0
        for v in range(min(max_n, i), 0, -1):
            if rev[i + 1 - v: i + 1] == rev[:v]:
                m = v
                break
        if m and m >= longest:  # ">=": later in reversed order = earlier in the context
            longest, position = m, i
    if longest < min_n:
        return []
    start = total - 1 - position + longest
    return list(tokens[start: start + min(k, total - start)])
