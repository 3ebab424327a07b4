"""A lab target turned into a QuaRot-style rotated checkpoint, in place.

Every RMSNorm weight is folded into the linear layers that read its output (and set to 1), the
residual stream is rotated by a random orthogonal matrix Q (embedding E Q; readers W Q; writers
Q^T W; the LM head, with the final norm folded in, W Q), and optionally every linear weight of
the layers is rounded to int8 per output channel. The target computes the same function
(RMSNorm commutes with an orthogonal rotation), up to the rounding; its hidden states, which a
drafter such as an EAGLE3 head reads, are rotated. Llama-style checkpoints in one
``model.safetensors`` (the lab's targets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

READERS = (("input_layernorm", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
           ("post_attention_layernorm", ("mlp.gate_proj", "mlp.up_proj")))
WRITERS = ("self_attn.o_proj", "mlp.down_proj")


def rotation(h: int, seed: int = 0) -> torch.Tensor:
    """The random orthogonal [h, h] matrix (float64) of ``seed``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(h, h, generator=g, dtype=torch.float64))
    return q


def _int8(w: torch.Tensor) -> torch.Tensor:
    scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127.0
    return (w / scale).round().clamp(-127, 127) * scale


def rotate_target(d: Path, seed: int = 0, int8: bool = False) -> None:
    """Rotate the target in ``d`` (its ``model.safetensors`` rewritten)."""
    import torch
    from safetensors.torch import load_file, save_file

    cfg = json.loads((d / "config.json").read_text())
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    q = rotation(h, seed)
    rnd = _int8 if int8 else (lambda w: w)
    path = d / "model.safetensors"
    t = dict(load_file(str(path)))
    f64 = {k: v.to(torch.float64) for k, v in t.items()}
    out = dict(f64)
    out["model.embed_tokens.weight"] = f64["model.embed_tokens.weight"] @ q
    out["lm_head.weight"] = (f64["lm_head.weight"] * f64["model.norm.weight"][None, :]) @ q
    out["model.norm.weight"] = torch.ones(h, dtype=torch.float64)
    for i in range(layers):
        p = f"model.layers.{i}."
        for norm, readers in READERS:
            w = f64[p + norm + ".weight"]
            for r in readers:
                out[p + r + ".weight"] = rnd((f64[p + r + ".weight"] * w[None, :]) @ q)
            out[p + norm + ".weight"] = torch.ones(h, dtype=torch.float64)
        for writer in WRITERS:
            out[p + writer + ".weight"] = rnd(q.T @ f64[p + writer + ".weight"])
    t.update({k: v.to(torch.float32) for k, v in out.items()})
    save_file({k: v.contiguous() for k, v in t.items()}, str(path), metadata={"format": "pt"})
