"""The EAGLE3 vocabulary-map check: d2t against t2d, and the repaired copy the oracle runs."""

from __future__ import annotations

import numpy as np
import pytest

from specdoctor.experiments.vocab import _read_map, check_map, map_copy

VOCAB = 64


def _map(draft_vocab: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A map as EAGLE3 training writes it: the draft vocabulary is a sorted set of target ids."""
    ids = np.sort(np.random.default_rng(seed).choice(VOCAB, draft_vocab, replace=False))
    t2d = np.zeros(VOCAB, dtype=bool)
    t2d[ids] = True
    return ids - np.arange(draft_vocab), t2d


def test_a_map_that_agrees_with_t2d_is_consistent():
    d2t, t2d = _map()
    chk = check_map(d2t, t2d, VOCAB)
    assert chk.consistent is True and chk.repaired is None


def test_a_shifted_d2t_is_caught_and_repaired_from_t2d():
    d2t, t2d = _map()
    chk = check_map(d2t + 1, t2d, VOCAB)
    assert chk.consistent is False
    assert "each one shifted by +1" in chk.evidence and "16 of 16" in chk.evidence
    np.testing.assert_array_equal(chk.repaired, d2t)


def test_one_wrong_entry_is_caught():
    d2t, t2d = _map()
    bad = d2t.copy()
    bad[3] += 1 if bad[3] + 3 + 1 not in np.flatnonzero(t2d) else 2
    chk = check_map(bad, t2d, VOCAB)
    assert chk.consistent is False and "1 of 16" in chk.evidence


def test_ids_outside_the_target_vocabulary_are_named():
    d2t, t2d = _map()
    chk = check_map(d2t + VOCAB, t2d, VOCAB)
    assert chk.consistent is False and chk.repaired is None and "outside" in chk.evidence


def test_without_t2d_nothing_is_claimed():
    d2t, _ = _map()
    assert check_map(d2t, None, VOCAB).consistent is None
    assert "not strictly increasing" in check_map(d2t[::-1].copy(), None, VOCAB).evidence


def test_sizes_that_disagree_are_inconclusive():
    d2t, t2d = _map()
    t2d[np.flatnonzero(~t2d)[0]] = True
    chk = check_map(d2t, t2d, VOCAB)
    assert chk.consistent is None and "17 target ids" in chk.evidence


def test_the_repaired_copy_carries_the_new_map_and_every_other_tensor(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    d2t, t2d = _map()
    src = tmp_path / "head"
    src.mkdir()
    (src / "config.json").write_text("{}")
    w = torch.randn(4, 4)
    save_file({"d2t": torch.from_numpy(d2t + 1), "t2d": torch.from_numpy(t2d), "fc.weight": w},
              str(src / "model.safetensors"))
    got_d2t, got_t2d = _read_map(src)
    np.testing.assert_array_equal(got_d2t, d2t + 1)
    np.testing.assert_array_equal(got_t2d, t2d)
    out = map_copy(src, d2t, tmp_path / "work")
    assert "head" not in str(out.relative_to(tmp_path / "work"))
    t = load_file(str(out / "model.safetensors"))
    np.testing.assert_array_equal(t["d2t"].numpy(), d2t)
    assert torch.equal(t["fc.weight"], w)
    np.testing.assert_array_equal(_read_map(src)[0], d2t + 1)   # the served files are untouched
