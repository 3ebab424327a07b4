"""DFlash block drafters as vLLM 0.32 serves them (``DFlashDraftModel``, qwen3_dflash.py;
proposer vllm/v1/spec_decode/dflash.py).

After the target verified up to position P - 1 and emitted x_P, the drafter predicts a block:

- context: every position t < P contributes K/V from ``hidden_norm(fc(aux states at t))``
  (aux ids ``dflash_config.target_layer_ids`` + 1: ``conventions.aux_ids``), with RoPE at t
  and the layer's k_norm;
- query block ``[x_P, mask × k]`` (``dflash_config.mask_token_id``) at positions P .. P + k,
  embedded with the target's embeddings (or the drafter's own), through the drafter's Qwen3
  layers, attending to the context and to the block: per layer causal or not, with or without
  a sliding window (``conventions.dflash_layer_attention``). The window follows vLLM's CPU
  attention: a key is seen when ``|q - k| < W``;
- draft j is the LM head's argmax at mask j (position P + 1 + j); the block the server runs is
  k + 1 long whatever the config's ``block_size`` (that is what it was trained with).

This is a correct engine: each layer's context K is normed with that layer's own k_norm. vLLM
0.32 on CPU is not: ``_normalize_context_k`` (qwen3_dflash.py) passes the layers' k_norm weights
stacked [layers, head_dim] to ``ops.rms_norm``, whose CPU kernel applies the first row to every
layer, so from the second draft layer on the context K is normed with the first layer's weight.
The oracle does not copy that; the replay reports it as drafts that differ from the drafter's
chain (engine-drafting).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.oracle.heads import checkpoint as ck
from specdoctor.oracle.heads import conventions, ops
from specdoctor.oracle.heads.layer import Attention, LayerWeights, attention_shape

if TYPE_CHECKING:
    import torch

ARCHITECTURES = ("DFlashDraftModel",)
WHERE = "vllm/model_executor/models/qwen3_dflash.py"
UNSUPPORTED = {"add_swa_attention_sink_bias": False}


@dataclass
class DFlashHead:
    method = "dflash"
    attn: Attention
    aux_ids: tuple[int, ...]
    layers: list[LayerWeights]
    attention: list[tuple[int | None, bool]]   # per layer: (window, causal)
    fc: torch.Tensor
    hidden_norm: torch.Tensor
    norm: torch.Tensor
    embed: torch.Tensor
    lm_head: torch.Tensor
    mask_token: int
    block_size: int | None = None
    # draft id -> target id offsets of a reduced draft vocabulary (None: the target's own), as
    # vLLM's DFlash scatters its logits (``draft_id_to_target_id``)
    d2t: torch.Tensor | None = None
    logit_scale: float = 1.0
    # How an engine may run the drafter other than as its checkpoint says
    # (``oracle.transforms``, the replay's search): the rotary positions of the draft block's
    # queries this far from their own (the context keeps its positions); the block's input
    # normed (the first layer's input norm) before it becomes the residual; the context keys
    # of every layer normed with this layer's k_norm.
    pos_offset: int = 0
    residual_normed: bool = False
    context_norm_from: int | None = None

    def to(self, device: str, dtype: torch.dtype) -> DFlashHead:
        return replace(self, layers=[w.to(device, dtype) for w in self.layers],
                       d2t=None if self.d2t is None else self.d2t.to(device),
                       **{n: getattr(self, n).to(device, dtype)
                          for n in ("fc", "hidden_norm", "norm", "embed", "lm_head")})

    def drafts(self, streams: list[torch.Tensor], ids: torch.Tensor, k: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T, k] drafts and margins per entry i: the block anchored at P = i + 1 (the
        last entry has no block: zeros)."""
        import torch

        b, t = ids.shape
        anchors = torch.arange(1, t, device=ids.device).expand(b, t - 1)
        logits = self.block_logits(torch.cat(streams, -1), ids, anchors, k)
        pad = torch.zeros(b, 1, k, dtype=torch.long, device=ids.device)
        mapped = ops.to_target_vocab(logits, self.d2t) * self.logit_scale
        drafted = torch.cat([mapped.argmax(-1), pad], 1)
        margins = torch.cat([ops.top2_margin(mapped), pad.float()], 1)
        return drafted, margins

    def block_logits(self, aux: torch.Tensor, ids: torch.Tensor, anchors: torch.Tensor, k: int
                     ) -> torch.Tensor:
        """Draft-vocabulary logits [B, A, k] of the blocks anchored at ``anchors`` [B, A] (the
        target's vocabulary unless the drafter has a ``d2t``)."""
        import torch

        eps = self.attn.eps
        dev = ids.device
        b, t = ids.shape
        a = anchors.shape[1]
        n = k + 1
        ctx = ops.rms_norm(ops.linear(aux, self.fc), self.hidden_norm, eps)
        offs = torch.arange(n, device=dev)
        qpos = (anchors[..., None] + offs).flatten(1) + self.pos_offset  # [B, A*n]
        tok = torch.full((b, a, n), self.mask_token, dtype=ids.dtype, device=dev)
        tok[..., 0] = torch.gather(ids, 1, anchors)
        h = self.embed[tok.flatten(1)]
        cpos = torch.arange(t, device=dev).expand(b, t)
        blk = torch.arange(a, device=dev).repeat_interleave(n)
        same = blk[:, None] == blk[None, :]
        inner = offs.repeat(a)
        before = torch.arange(t, device=dev)[None, None, :] < anchors.repeat_interleave(n, 1)[
            ..., None]
        residual = None
        for w, (window, causal) in zip(self.layers, self.attention):
            see_ctx, see_blk = before, same
            if window:
                see_ctx = see_ctx & (qpos[..., None] - torch.arange(t, device=dev) < window)
                see_blk = see_blk & ((inner[:, None] - inner[None, :]).abs() < window)
            if causal:
                see_blk = see_blk & (inner[:, None] >= inner[None, :])
            mask = torch.cat([see_ctx, see_blk[None].expand(b, -1, -1)], -1)
            wk = w if self.context_norm_from is None else replace(
                w, k_norm=self.layers[self.context_norm_from].k_norm)
            kc = wk.k_heads(ctx, self.attn, cpos)
            vc = w.v_heads(ctx, self.attn)
            if residual is None:
                residual = ops.rms_norm(h, w.input_norm, eps) if self.residual_normed else h
            else:
                residual = h + residual
            x = ops.rms_norm(residual, w.input_norm, eps)
            att = ops.attend(w.q_heads(x, self.attn, qpos),
                             torch.cat([kc, w.k_heads(x, self.attn, qpos)], 1),
                             torch.cat([vc, w.v_heads(x, self.attn)], 1), mask)
            residual = ops.linear(att, w.o) + residual
            h = w.mlp(ops.rms_norm(residual, w.post_norm, eps))
        out = ops.rms_norm(h + residual, self.norm, eps).view(b, a, n, -1)[:, :, 1:]
        return ops.linear(out, self.lm_head)


def read(draft_dir: Path, target_cfg: dict[str, Any], target_tensors: Any) -> DFlashHead:
    cfg = ck.read_config(draft_dir)
    return build(cfg, ck.load_tensors(draft_dir), target_cfg, target_tensors)


def build(cfg: dict[str, Any], t: dict[str, Any], target_cfg: dict[str, Any],
          target_tensors: Any) -> DFlashHead:
    target, hidden, ids = ck.common(cfg, target_cfg, "a DFlash drafter", WHERE, ARCHITECTURES,
                                    "dflash")
    dcfg = ck.need(cfg, "dflash_config", "DFlash", WHERE)
    if not isinstance(dcfg, dict):
        raise ck.InputError("dflash_config is not an object", f"see {WHERE}")
    ck.refuse_unsupported({**cfg, **dcfg}, "DFlash", UNSUPPORTED)
    mask_token = int(ck.need(dcfg, "mask_token_id", "dflash_config", WHERE))
    ck.need(dcfg, "target_layer_ids", "dflash_config", WHERE)
    if not 0 <= mask_token < target.vocab:
        raise ck.InputError(f"mask_token_id {mask_token} is outside the vocabulary "
                            f"({target.vocab})", "set dflash_config.mask_token_id")
    t = {n[len("model."):] if n.startswith("model.") else n: v for n, v in t.items()}
    n_layers = int(ck.need(cfg, "num_hidden_layers", "DFlash", WHERE))
    fc = ck.take(t, "fc.weight", "DFlash")
    ck.check_shape("fc.weight", fc, (hidden, len(ids) * target.hidden))
    embed = t.get("embed_tokens.weight")
    if embed is None:
        embed = target_tensors("model.embed_tokens.weight")
    lm = t.get("lm_head.weight")
    if lm is None:
        lm = target_tensors("lm_head.weight")
    import torch

    draft_vocab = int(cfg.get("draft_vocab_size") or target.vocab)
    d2t = t.get("d2t")
    if draft_vocab != target.vocab and d2t is None:
        # as vLLM serves it: a smaller draft vocabulary without d2t keeps zero offsets
        d2t = torch.zeros(draft_vocab, dtype=torch.long)
    if d2t is not None:
        ck.check_shape("d2t", d2t, (draft_vocab,))
        d2t = d2t.long()
        top = int((torch.arange(draft_vocab) + d2t).max())
        if top >= target.vocab:
            raise ck.InputError(f"d2t maps a draft id to target id {top}, past the target "
                                f"vocabulary ({target.vocab})", "check the drafter's d2t")
    ck.check_shape("lm_head.weight", lm, (draft_vocab, lm.shape[-1]))
    return DFlashHead(
        attn=attention_shape(cfg), aux_ids=ids,
        layers=[LayerWeights.read(t, f"layers.{i}.", "DFlash") for i in range(n_layers)],
        attention=[conventions.dflash_layer_attention(cfg, i) for i in range(n_layers)],
        fc=fc, hidden_norm=ck.take(t, "hidden_norm.weight", "DFlash"),
        norm=ck.take(t, "norm.weight", "DFlash"), embed=embed, lm_head=lm,
        mask_token=mask_token, block_size=cfg.get("block_size"),
        d2t=None if draft_vocab == target.vocab else d2t,
        logit_scale=float(cfg.get("logit_scale", 1.0)))
