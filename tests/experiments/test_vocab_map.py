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


def test_a_dflash_drafter_with_a_map_of_its_own_gets_the_map_check(tmp_path):
    """The map check follows the checkpoint, not the method: the lab's (ci) DFlash drafter
    given a reduced head of its own with d2t and t2d, d2t off by one on a block of ids (the two
    tables disagree there), is read through the map check, which rebuilds d2t from t2d and
    confirms tokenizer-mismatch through the oracle; the same drafter without a map of its own
    is checked as drafting in the target's vocabulary."""
    import json
    import shutil
    import sys

    import pytest

    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    from specdoctor.bench.prompts import take
    from specdoctor.experiments import common
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.vocab import VocabMapCheck, ships_map
    from specdoctor.lab import drafters
    from specdoctor.launch import LaunchSpec
    from specdoctor.verdict.findings import Verdict

    target, draft = drafters.module("dflash").trained_pair("ci")

    def ctx_for(d):
        spec = json.dumps({"method": "dflash", "model": str(d), "num_speculative_tokens": 3})
        la = LaunchSpec((sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                         str(target), "--dtype", "float32", "--speculative-config", spec))
        ctx = Context(workdir=tmp_path / "w", launch=la, method="dflash", k=3,
                      target_dir=target, draft_dir=d, prompts=tuple(take("code", 6)),
                      max_tokens=24)
        ctx.settings = common.settings(la)
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        return ctx

    plain = ctx_for(draft)
    assert not ships_map(plain)
    d = tmp_path / "reduced"
    shutil.copytree(draft, d)
    tensors = load_file(str(d / "model.safetensors"))
    full = load_file(str(target / "model.safetensors"))["lm_head.weight"]  # shared by default
    vocab = full.shape[0]
    keep = torch.arange(0, vocab, 2)                       # every other target id
    tensors["lm_head.weight"] = full[keep].contiguous()
    ids = keep.clone()
    ids[20:60] = keep[21:61]                               # off by one on 40 draft ids
    tensors["d2t"] = (ids - torch.arange(len(keep))).to(torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[keep] = True
    tensors["t2d"] = t2d
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((d / "config.json").read_text())
    cfg["draft_vocab_size"] = len(keep)
    (d / "config.json").write_text(json.dumps(cfg))
    ctx = ctx_for(d)
    assert ships_map(ctx)
    res = VocabMapCheck().run(ctx, ("tokenizer-mismatch",))
    f = res.findings[0]
    assert res.numbers["has_d2t"] and res.numbers["consistent"] is False, res.numbers
    assert f.verdict is Verdict.CONFIRMED and f.basis == "counterfactual", f.evidence
