"""Served-file edits of the part-keyed clinic cases (benchmarks/clinic/families.py): what they
change and what they leave, on small tensors and a small tokenizer.json, without a server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

CLINIC = Path(__file__).resolve().parents[3] / "benchmarks" / "clinic"
sys.path.insert(0, str(CLINIC))

import families  # noqa: E402


def _draft(d: Path, vocab: int = 40, h: int = 8) -> dict:
    from safetensors.torch import save_file

    d.mkdir()
    g = torch.Generator().manual_seed(0)
    t = {"model.embed_tokens.weight": torch.randn(vocab, h, generator=g),
         "lm_head.weight": torch.randn(vocab, h, generator=g)}
    save_file(t, str(d / "model.safetensors"))
    tok = {"added_tokens": [{"id": 0, "content": "<s>"}, {"id": 12, "content": "<pad>"}],
           "model": {"vocab": {f"t{i}": i for i in range(vocab)}}}
    (d / "tokenizer.json").write_text(json.dumps(tok))
    return t


def test_a_block_permuted_vocabulary_is_the_same_model_in_its_own_ids(tmp_path):
    from safetensors.torch import load_file

    before = _draft(tmp_path / "m2")
    families.permute_vocab_block(tmp_path / "m2", lo=8, hi=20)
    after = load_file(str(tmp_path / "m2" / "model.safetensors"))
    vocab = json.loads((tmp_path / "m2" / "tokenizer.json").read_text())["model"]["vocab"]
    moved = {s for s, i in vocab.items() if i != int(s[1:])}
    assert moved and all(8 <= int(s[1:]) < 20 for s in moved)   # only the block moves
    assert vocab["t12"] == 12                                  # a special token stays
    for s, new in vocab.items():                               # each string keeps its rows
        old = int(s[1:])
        for name in ("model.embed_tokens.weight", "lm_head.weight"):
            assert torch.equal(after[name][new], before[name][old])


def test_a_block_permuted_d2t_keeps_t2d_and_moves_only_the_block(tmp_path):
    from safetensors.torch import load_file, save_file

    (tmp_path / "m2").mkdir()
    ids = torch.tensor(sorted(torch.randperm(64, generator=torch.Generator().manual_seed(3))
                              [:24].tolist()))
    d2t = ids - torch.arange(24)
    t2d = torch.zeros(64, dtype=torch.bool)
    t2d[ids] = True
    save_file({"d2t": d2t, "t2d": t2d, "lm_head.weight": torch.ones(24, 4)},
              str(tmp_path / "m2" / "model.safetensors"))
    families.d2t_block_permuted(tmp_path / "m2", size=10)
    after = load_file(str(tmp_path / "m2" / "model.safetensors"))
    mapped = torch.arange(24) + after["d2t"]
    assert torch.equal(after["t2d"], t2d)
    assert set(mapped.tolist()) == set(ids.tolist())           # the tables still agree
    assert torch.equal(mapped[10:], ids[10:])                  # outside the block: as before
    assert not torch.equal(mapped[:10], ids[:10])              # the block names other tokens
    assert set(mapped[:10].tolist()) == set(ids[:10].tolist())
