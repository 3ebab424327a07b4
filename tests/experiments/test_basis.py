"""hidden-basis: the drafter's tensors against the target's, as served and best rotated.

The math on its own (a rotation is found on rows it was not fitted on; unrelated rows are not
"rotated"; fc rotated back reads rotated states as it read the originals), then the experiment
on the lab's ci-budget EAGLE3 head through the oracle: beside its own target, same basis
(excluded); beside that target rotated QuaRot-style (``specdoctor.lab.rotated``, which computes
the same function), the rotation is found and the head rotated back recovers (confirmed).
Cost: two oracle runs of the lab's two-layer target (seconds each)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.basis import (
    ROTATED_GAIN,
    TRACKS,
    align,
    procrustes,
    rotate_fc,
)

H = 32


def _orthogonal(h: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((h, h)))
    return q


def test_procrustes_recovers_a_rotation():
    a = np.random.default_rng(0).standard_normal((200, H))
    q = _orthogonal(H, 1)
    np.testing.assert_allclose(procrustes(a, a @ q), q, atol=1e-8)


def test_rows_of_a_rotated_copy_align_only_after_the_rotation():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, H))
    b = (a + 0.3 * rng.standard_normal(a.shape)) @ _orthogonal(H, 1)   # trained away a little
    al = align("lm_head", a, b)
    assert al.served < 0.2 and al.aligned > 0.9, al.text()
    assert al.tracks and al.rotated


def test_rows_in_the_same_basis_are_not_called_rotated():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, H))
    al = align("lm_head", a, a + 0.5 * rng.standard_normal(a.shape))
    assert al.served > TRACKS and al.aligned - al.served < ROTATED_GAIN, al.text()
    assert al.tracks and not al.rotated


def test_unrelated_rows_track_nothing_although_a_map_fits_them():
    """With fewer rows than twice the width a map fits half of them well: the score on the
    other half is what counts."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, H)), rng.standard_normal((96, H))
    al = align("lm_head", a, b)
    assert al.aligned < TRACKS and not al.rotated, al.text()


def test_fc_rotated_back_reads_rotated_states_as_the_originals():
    rng = np.random.default_rng(0)
    fc = rng.standard_normal((H, 3 * H))
    q = _orthogonal(H, 2)
    states = rng.standard_normal((5, 3, H))                    # three aux states per token
    flat = states.reshape(5, -1)
    rotated = (states @ q).reshape(5, -1)
    np.testing.assert_allclose(rotated @ rotate_fc(fc, q).T, flat @ fc.T, atol=1e-9)
    with pytest.raises(ValueError, match="not a multiple"):
        rotate_fc(fc[:, :-1], q)


# -- on the lab's head, through the oracle ------------------------------------------------------

K = 3


@pytest.fixture(scope="module")
def pair():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import targets

    target, draft = drafters.module("eagle3").trained_pair("ci")
    return target, draft, targets.tokenizer_dir()


def _context(work: Path, target: Path, draft: Path, tok: Path):
    from specdoctor.bench.prompts import take
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.common import Settings

    return Context(workdir=work, method="eagle3", k=K, target_dir=target, draft_dir=draft,
                   tokenizer_dir=tok, prompts=tuple(take("code", 6) + take("essay", 6)),
                   max_tokens=48, settings=Settings(target, "eagle3", K, draft, tok, (2, 4),
                                                    "float32", None, "greedy"))


def _run(tmp: Path, pair, rotate: bool):
    from specdoctor.experiments.basis import HiddenBasis
    from specdoctor.lab.rotated import rotate_target

    src_t, src_d, tok = pair
    t, d = tmp / "target", tmp / "draft"
    for src, dst in ((src_t, t), (src_d, d)):
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("specdoctor*"))
    if rotate:
        rotate_target(t, seed=0)
    res = HiddenBasis().run(_context(tmp / "work", t, d, tok), ("target-basis",))
    (f,) = res.findings
    return f, res.numbers


def test_the_head_beside_its_own_target_is_in_its_basis(tmp_path, pair):
    f, nums = _run(tmp_path, pair, rotate=False)
    assert f.verdict is Verdict.EXCLUDED, f.evidence
    assert "same basis" in f.evidence and "before" not in nums   # no oracle run needed


def test_a_rotated_target_is_found_and_the_head_rotated_back_recovers(tmp_path, pair):
    """Recovered to what the head reaches beside its own target (the oracle of the pair as
    built): rotating back only fc, or only the embedding, falls well short of it."""
    from specdoctor.experiments.common import apd
    from specdoctor.experiments.oracle_gap import expected_profile, run_oracle

    f, nums = _run(tmp_path / "rotated", pair, rotate=True)
    assert f.verdict is Verdict.CONFIRMED, f.evidence
    assert f.basis == "counterfactual" and "rotated against the drafter's" in f.evidence
    own = apd(expected_profile(run_oracle(_context(tmp_path / "own", *pair), 0.0, 1.0)))
    assert nums["before"] < 0.1 * own and nums["after"] >= 0.8 * own, (nums, own)
    assert "vllm-ascend PR #6914" in f.evidence
