"""Reference tensor code shared by the drafters: the few ops vLLM's drafter forwards are made of.

Each drafter module re-states its vLLM forward with these functions, once, and trains its head
through that statement; the head is then served by vLLM and replayed by the oracle. So the
conventions must be vLLM's exactly:

- RMSNorm: ``x * rsqrt(mean(x^2) + eps) * w`` (fp32 here throughout);
- RoPE: neox style (rotate halves), ``inv_freq = theta^(-2i/d)``, on absolute positions;
- attention: ``softmax(q k^T / sqrt(d))`` with grouped KV heads and an explicit boolean mask
  (True = may attend), so causal, non-causal and training-time-test layouts are all one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specdoctor.oracle.heads.ops import attend  # noqa: F401 - one GQA attention for training and the oracle

if TYPE_CHECKING:
    import torch

EPS = 1e-6


@dataclass(frozen=True)
class LayerShape:
    """The decoder-layer shape every lab drafter shares with the lab target."""

    hidden: int = 128
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 384
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate ``x`` [..., T, heads, d] by absolute positions ``pos`` [..., T] (neox style)."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.to(torch.float32)[..., None] * inv  # [..., T, d/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[..., None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[..., None, :]
    half = d // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def swiglu(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
           ) -> torch.Tensor:
    import torch

    return torch.nn.functional.linear(
        torch.nn.functional.silu(x @ gate.T) * (x @ up.T), down)


def heads(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.unflatten(-1, (n, x.shape[-1] // n))


def ttt_mask(t: int, step: int) -> torch.Tensor:
    """The mask of one training-time-test step for a chain drafter (EAGLE3, MTP).

    Keys are laid out as ``step + 1`` blocks of ``t`` entries: block 0 holds the first-pass
    entries (computed from the target's hidden states, one per position), block s >= 1 the
    entries the drafter wrote at its own step s. In the server, the draft started after
    position i sees, at its step ``step``, the first-pass entries at positions <= i and its own
    earlier steps' entries for that same start — the diagonal of each later block."""
    import torch

    causal = torch.ones(t, t, dtype=torch.bool).tril()
    eye = torch.eye(t, dtype=torch.bool)
    return torch.cat([causal] + [eye] * step, dim=1)[None]
