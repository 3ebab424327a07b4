"""The speed model speedup ≈ AL / (1 + k·c): the draft's cost per drafted token from a measured
speedup, the speedup another acceptance would give, break-even, and the size cross-check."""

from __future__ import annotations

import math

import pytest

from specdoctor.acceptance import speedup as sp


def test_cost_and_speedup_are_one_model_read_both_ways():
    # k=3, 1.0 accepted per draft (AL 2.0) at 0.85x: c = (2.0/0.85 - 1)/3
    c = sp.draft_cost(0.85, 1.0, 3)
    assert math.isclose(c, (2.0 / 0.85 - 1.0) / 3, rel_tol=1e-12)
    assert math.isclose(sp.speedup(1.0, 3, c), 0.85, rel_tol=1e-12)
    # a free draft: the speedup is AL itself
    assert sp.speedup(2.0, 4, 0.0) == 3.0 and sp.draft_cost(3.0, 2.0, 4) == 0.0
    # faster than AL allows (noise): the draft is free as far as the model can tell, never < 0
    assert sp.draft_cost(3.5, 2.0, 4) == 0.0
    # break-even: k·c accepted per draft gives exactly 1x
    assert math.isclose(sp.speedup(sp.break_even(3, c), 3, c), 1.0, rel_tol=1e-12)
    # a draft as costly as its target (c = 1) never pays, even with every draft accepted
    assert sp.speedup(4.0, 4, 1.0) == 1.0 and sp.speedup(3.9, 4, 1.0) < 1.0


def test_nonsense_is_refused():
    for args in ((0.0, 1.0, 3), (0.9, -1.0, 3), (0.9, 1.0, 0)):
        with pytest.raises(ValueError):
            sp.draft_cost(*args)
    with pytest.raises(ValueError):
        sp.speedup(1.0, 0, 0.1)


def test_size_ratio_from_the_weight_files(tmp_path):
    draft, target = tmp_path / "draft", tmp_path / "target"
    draft.mkdir()
    target.mkdir()
    (draft / "model.safetensors").write_bytes(b"x" * 100)
    (draft / "config.json").write_text("{}" * 500)   # not weights
    (target / "model-00001-of-00002.safetensors").write_bytes(b"x" * 600)
    (target / "model-00002-of-00002.safetensors").write_bytes(b"x" * 400)
    assert sp.size_ratio(draft, target) == 0.1
    assert sp.size_ratio(target, target) == 1.0        # the target drafting for itself
    assert sp.size_ratio(None, target) is None
    assert sp.size_ratio(tmp_path / "nope", target) is None
