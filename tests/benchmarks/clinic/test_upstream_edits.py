"""Served-file edits of the upstream clinic cases that claim to leave the drafter's function
unchanged: checked on small random tensors, without a server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

CLINIC = Path(__file__).resolve().parents[3] / "benchmarks" / "clinic"
sys.path.insert(0, str(CLINIC))

import upstream  # noqa: E402


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _first_layer_inputs(t: dict, embed: torch.Tensor, h: int) -> list[torch.Tensor]:
    """What q/k/v of the head's layer read from the embedding half of their input."""
    normed = _rms(embed) * t["midlayer.input_layernorm.weight"]
    return [normed @ t[f"midlayer.self_attn.{p}.weight"][:, :h].T
            for p in ("q_proj", "k_proj", "v_proj")]


def test_own_embedding_drafts_as_before_and_the_targets_embedding_does_not(tmp_path):
    from safetensors.torch import load_file, save_file

    h, vocab = 16, 40
    g = torch.Generator().manual_seed(1)
    embed = torch.randn(vocab, h, generator=g)
    (tmp_path / "m1").mkdir()
    (tmp_path / "m2").mkdir()
    save_file({"model.embed_tokens.weight": embed}, str(tmp_path / "m1" / "model.safetensors"))
    head = {"midlayer.input_layernorm.weight": 0.5 + torch.rand(h, generator=g),
            "midlayer.self_attn.q_proj.weight": torch.randn(8, 2 * h, generator=g),
            "midlayer.self_attn.k_proj.weight": torch.randn(4, 2 * h, generator=g),
            "midlayer.self_attn.v_proj.weight": torch.randn(4, 2 * h, generator=g)}
    save_file(head, str(tmp_path / "m2" / "model.safetensors"))

    upstream.own_embedding(tmp_path / "m2")
    edited = load_file(str(tmp_path / "m2" / "model.safetensors"))

    assert not torch.allclose(edited["embed_tokens.weight"], embed, atol=1e-2)
    before = _first_layer_inputs(head, embed, h)
    own = _first_layer_inputs(edited, edited["embed_tokens.weight"], h)
    shared = _first_layer_inputs(edited, embed, h)
    for b, o, s in zip(before, own, shared):
        assert torch.allclose(b, o, atol=1e-4)          # its own embedding: same function
        assert (b - s).abs().max() > 0.1                # the target's: another input
    # the half that reads the target's hidden state is untouched
    for p in ("q_proj", "k_proj", "v_proj"):
        key = f"midlayer.self_attn.{p}.weight"
        assert torch.equal(edited[key][:, h:], head[key][:, h:])
