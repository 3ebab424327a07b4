"""The prompt-lookup simulation proposes what vLLM's NgramProposer proposes."""

import numpy as np
import pytest

from specdoctor.oracle.ngram import propose


def test_longest_match_wins_and_the_continuation_is_proposed():
    #        0  1  2  3  4  5  6  7  8  9
    toks = [1, 2, 3, 9, 9, 7, 2, 3, 4, 2, 3]
    # suffix [2, 3] occurs at 1..2 and 6..7; [x, 2, 3] never repeats -> n = 2, earliest wins.
    assert propose(toks, 2, 4, 3) == [9, 9, 7]


def test_no_match_shorter_than_min_n():
    assert propose([1, 2, 3, 4, 5, 3], 2, 4, 3) == []
    assert propose([1, 2, 3, 4, 5, 3], 1, 4, 3) == [4, 5, 3]
    assert propose([1], 2, 4, 3) == []


def test_draft_is_cut_at_the_end_of_the_context_and_at_max_model_len():
    toks = [5, 6, 7, 5, 6]
    assert propose(toks, 2, 4, 5) == [7, 5, 6]
    assert propose(toks, 2, 4, 5, max_model_len=7) == [7, 5]
    assert propose(toks, 2, 4, 5, max_model_len=5) == []


def test_matches_vllm_on_random_contexts():
    try:
        from vllm.v1.spec_decode.ngram_proposer import (
            _find_longest_matched_ngram_and_propose_tokens as vllm_propose,
        )
    except Exception:  # noqa: BLE001 - vLLM absent or not importable here
        pytest.skip("vLLM's n-gram proposer is not importable")
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 60))
        alphabet = int(rng.integers(2, 6))
        toks = rng.integers(0, alphabet, size=n).astype(np.int32)
        min_n, max_n = int(rng.integers(1, 3)), int(rng.integers(3, 6))
        k = int(rng.integers(1, 6))
        ref = vllm_propose(toks, min_n, max_n, 10_000, k).tolist()
        assert propose(toks.tolist(), min_n, max_n, k, 10_000) == ref, (trial, toks.tolist())
