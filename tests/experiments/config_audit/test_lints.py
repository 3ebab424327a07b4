"""Launch lints: vLLM's cudagraph rounding rule, k vs the trained block, start-up warnings
(log lines as vLLM 0.32 prints them; the rounding rule is checked against vLLM's own method
when vLLM is installed)."""

from __future__ import annotations

import importlib.util

import pytest

from specdoctor.experiments.config_audit import lints


def test_case_b_cudagraph_sizes():
    # MTP4 (k=4): a maximum of 4 leaves no multiple of 5 → vLLM refuses to start
    assert lints.cudagraph_sizes_for_k([1, 2, 4], 4, 4) == []
    assert lints.lint_cudagraph(4, [1, 2, 4], 4)[0].level == "problem"
    assert lints.cudagraph_sizes_for_k([1, 2, 4, 8], 10, 4) == [5, 10]
    assert lints.lint_cudagraph(4, [1, 2, 4, 8], 10) == []
    # one valid size that would be rounded down is kept
    assert lints.cudagraph_sizes_for_k([8], 6, 4) == [5]
    info = lints.lint_cudagraph(3, [1, 2, 4, 8], 8, max_num_seqs=8)
    assert info and info[0].level == "info" and "max_num_seqs=8" in info[0].detail


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
@pytest.mark.parametrize("sizes, max_size, k", [([1, 2, 4, 8], 10, 4), ([1, 2, 4], 4, 4),
                                                ([8], 6, 4), ([1, 2, 4, 8, 16], 16, 2)])
def test_rounding_rule_matches_vllms_own(sizes, max_size, k):
    from vllm.config import CompilationConfig

    cc = CompilationConfig(cudagraph_capture_sizes=list(sizes), max_cudagraph_capture_size=max_size)
    try:
        cc.adjust_cudagraph_sizes_for_spec_decode(k + 1)
        theirs = cc.cudagraph_capture_sizes
    except ValueError as exc:
        assert "No valid cudagraph sizes" in str(exc)
        theirs = []
    assert lints.cudagraph_sizes_for_k(sizes, max_size, k) == theirs


def test_k_against_the_trained_block():
    assert lints.lint_block_size(7, 8) == []
    assert lints.lint_block_size(8, 8)[0].level == "suspect"
    assert lints.lint_block_size(1, 16)[0].level == "info"
    assert lints.lint_block_size(4, None) == []


LOG = """\
(APIServer pid=1) WARNING 11-30 09:00:00 [vllm.py:1606] Async scheduling not supported with ngram-based speculative decoding and will be disabled.
(APIServer pid=1) INFO 11-30 09:00:01 [model.py:2152] Using max model len 1024
(EngineCore pid=2) WARNING 11-30 09:00:02 [__init__.py:212] min_p and logit_bias parameters won't work with speculative decoding.
(EngineCore pid=2) WARNING 11-30 09:00:02 [__init__.py:212] min_p and logit_bias parameters won't work with speculative decoding.
(Worker pid=3) INFO 11-30 09:00:03 [decorators.py:600] Compiling model again due to a load failure from /c/torch_aot_compile/abc/rank_0_0/model, reason: 'function' object has no attribute 'finalize_loading'
"""


def test_log_warnings_each_once_with_their_line():
    found = lints.lint_log(LOG)
    assert [(x.level, x.detail.split(":")[0]) for x in found] == [
        ("info", "async scheduling is off for this launch"),
        ("suspect", "requests' min_p and logit_bias are ignored while speculating"),
        ("info", "a compile-cache entry failed to load and was recompiled (see `specdoctor cache scan`)"),
    ]
    assert "ngram-based" in found[0].evidence
    assert lints.lint_log("INFO nothing to see\n") == []
