"""The few tensor operations vLLM's drafter forwards are made of, stated once for the oracle.

Conventions are vLLM's: RMSNorm ``x * rsqrt(mean(x^2) + eps) * w`` computed in float32; RoPE
neox style (rotate halves) on absolute positions, with the checkpoint's scaling variant
(``rope_inverse_frequencies`` asks transformers' own table, so default, linear, llama3, yarn
and longrope read the keys the checkpoint has); attention ``softmax(q k^T / sqrt(d))`` with
grouped KV heads and an explicit boolean mask (True = may attend), so causal, non-causal,
sliding-window and training-time-test layouts are all one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Rope:
    inv_freq: torch.Tensor   # [head_dim / 2]
    scale: float = 1.0       # yarn's attention factor on cos/sin (1 elsewhere)


def rope_from_config(cfg: dict[str, Any], head_dim: int) -> Rope:
    """Inverse frequencies for ``head_dim`` from a config's rope keys (``rope_parameters``,
    or the older ``rope_theta`` + ``rope_scaling``)."""
    import torch
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = dict(cfg.get("rope_parameters") or {})
    if not params:
        params = dict(cfg.get("rope_scaling") or {})
        if "type" in params and "rope_type" not in params:
            params["rope_type"] = params.pop("type")
        params.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    kind = params.get("rope_type", "default")
    theta = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if kind == "default":
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        return Rope(inv, 1.0)
    if kind not in ROPE_INIT_FUNCTIONS:
        from specdoctor.errors import InputError

        raise InputError(f"unknown rope_type {kind!r} in the checkpoint's config",
                         f"known: default, {', '.join(ROPE_INIT_FUNCTIONS)}")
    hf = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, head_dim=head_dim,
                     max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
                     rope_parameters={**params, "rope_theta": theta})
    inv, scale = ROPE_INIT_FUNCTIONS[kind](hf, "cpu")
    return Rope(inv.to(torch.float32), float(scale))


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    import torch

    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope(x: torch.Tensor, pos: torch.Tensor, r: Rope) -> torch.Tensor:
    """Rotate ``x`` [..., T, heads, d] by absolute positions ``pos`` [..., T] (neox style)."""
    import torch

    inv = r.inv_freq.to(x.device)
    ang = pos.to(torch.float32)[..., None] * inv  # [..., T, d/2]
    cos = (torch.cat([ang.cos(), ang.cos()], -1) * r.scale)[..., None, :].to(x.dtype)
    sin = (torch.cat([ang.sin(), ang.sin()], -1) * r.scale)[..., None, :].to(x.dtype)
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """q [B, Tq, Hq, d], k/v [B, Tk, Hkv, d], mask [B or 1, Tq, Tk] → [B, Tq, Hq*d]."""
    import torch

    hq, hkv = q.shape[2], k.shape[2]
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, dim=2)
        v = v.repeat_interleave(hq // hkv, dim=2)
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None])
    return out.transpose(1, 2).flatten(2)


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    import torch

    return torch.nn.functional.linear(x, w, b)


def swiglu(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
           ) -> torch.Tensor:
    import torch

    return linear(torch.nn.functional.silu(linear(x, gate)) * linear(x, up), down)


def heads(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.unflatten(-1, (n, x.shape[-1] // n))


def chain_mask(t: int, step: int, device: Any = None) -> torch.Tensor:
    """Mask of chain step ``step`` of a drafter that feeds itself (EAGLE3, MTP), for every
    start at once. Keys are ``step + 1`` blocks of ``t`` entries: block 0 the first-pass
    entries (one per position, from the target's states), block s >= 1 the entries written
    at chain step s. The draft started after position i sees, at step ``step``, the first-pass
    entries at positions <= i and its own earlier entries for that start (a diagonal)."""
    import torch

    causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
    eye = torch.eye(t, dtype=torch.bool, device=device)
    return torch.cat([causal] + [eye] * step, dim=1)[None]


def leading_runs(right: torch.Tensor) -> torch.Tensor:
    """right [..., k] booleans (draft j right) → how many leading drafts are right."""
    import torch

    return torch.cumprod(right.to(torch.int64), dim=-1).sum(-1)


def top2_margin(logits: torch.Tensor) -> torch.Tensor:
    """top1 - top2 over the last dimension, float32."""
    top = logits.float().topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def to_target_vocab(logits: torch.Tensor, d2t: torch.Tensor | None) -> torch.Tensor:
    """Draft-vocabulary logits over the target's vocabulary as vLLM's EAGLE3 and DFlash
    heads scatter them (``logits_new[:, arange + d2t] = logits``): -inf where no draft id
    maps, and where two draft ids map to one target id the later one's logit (the write that
    lands last). Without a map, the logits as they are."""
    import torch

    if d2t is None:
        return logits
    targets = torch.arange(len(d2t), device=d2t.device) + d2t.long()
    src = torch.full((int(targets.max()) + 1,), -1, dtype=torch.long, device=d2t.device)
    src.scatter_reduce_(0, targets, torch.arange(len(d2t), device=d2t.device), reduce="amax")
    out = logits[..., src.clamp(min=0)]
    return out.masked_fill(src < 0, float("-inf"))


def unshift_prompt(tok: torch.Tensor, hidden: torch.Tensor, ids: torch.Tensor, prompt: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """A head's first-pass inputs with the prompt's entries one position late, as vLLM V0's
    EAGLE/MTP paired them (vLLM issue #14647): entry p of the prompt (p < prompt - 1, the
    sample slot excepted) holds token p and the target state of p - 1 (zeros at the first)
    instead of token p + 1 and the state of p; the entries after the prompt as they were."""
    import torch

    n = max(min(prompt, ids.shape[1]) - 1, 0)
    if n == 0:
        return tok, hidden
    tok, hidden = tok.clone(), hidden.clone()
    tok[:, :n] = ids[:, :n]
    late = torch.cat([torch.zeros_like(hidden[:, :1]), hidden[:, :n - 1]], 1)
    hidden[:, :n] = late
    return tok, hidden
