"""MTP layers inside a target checkpoint, as vLLM 0.32 runs them.

**MiMo** (``MiMoForCausalLM`` with ``num_nextn_predict_layers``; vllm/model_executor/models/
mimo_mtp.py; tensors ``model.mtp_layers.{i}.*``, sharing the target's embeddings and LM head):

    x   = input_proj([hidden_layernorm(h), token_layernorm(embed(token))])  (embed zeroed at
          position 0)
    out = final_layernorm(x + Qwen2DecoderLayer(x))        → logits = lm_head(out)

``h`` is the target's last hidden state before its final norm (MiMo's model returns
``hidden + residual``); each further step feeds ``out`` back with the token it drafted. vLLM
0.32's proposer never passes a step index, so layer 0 runs every step (recursively, with a
warning, when k exceeds the layers the checkpoint has).

**DeepSeek-style** (``DeepseekV3ForCausalLM``, deepseek_mtp.py; ``model.layers.{L + i}.`` with
``enorm``, ``hnorm``, ``eh_proj``, ``shared_head``) is recognised and refused: its block is
DeepSeek's MLA attention with a mixture-of-experts MLP, which the oracle's forward does not
compute yet (see docs/oracle.md). The other MTP families vLLM 0.32 ships (Qwen3-Next and
Qwen3.5, GLM-4 MoE, ERNIE, LongCat, Bailing, Step3p5, Nemotron-H, Gemma4, ...) are refused by
architecture for the same reason: each has its own block (MoE, linear attention or hybrid
state) that no lab-size CPU model here exercises.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from specdoctor.oracle.heads import checkpoint as ck
from specdoctor.oracle.heads import conventions, ops
from specdoctor.oracle.heads.layer import Attention, LayerWeights, attention_shape

if TYPE_CHECKING:
    import torch

MIMO = ("MiMoForCausalLM",)
DEEPSEEK = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV2ForCausalLM")
WHERE = "vllm/model_executor/models/mimo_mtp.py"


@dataclass
class MiMoMTP:
    method = "mtp"
    attn: Attention
    aux_ids: tuple[int, ...]      # (L,): the last layer's output before the final norm
    layer: LayerWeights
    token_norm: torch.Tensor
    hidden_norm: torch.Tensor
    input_proj: torch.Tensor
    final_norm: torch.Tensor
    embed: torch.Tensor
    lm_head: torch.Tensor
    layers_in_checkpoint: int = 1
    block_size: int | None = None
    # How an engine may run the layer other than as its checkpoint says (``oracle.transforms``,
    # the replay's search): the rotary positions of the draft decode steps (the second draft
    # on) this far from their own; the later steps fed the target's state again; the projected
    # input normed (the block's input norm) before it becomes the residual; the recursion fed
    # the output before the final norm.
    pos_offset: int = 0
    recursion_from_target: bool = False
    residual_normed: bool = False
    recursion_norm_flipped: bool = False
    prompt_unshifted: int = 0     # the prompt's entries one position late (its length; 0: not)

    def to(self, device: str, dtype: torch.dtype) -> MiMoMTP:
        return replace(self, layer=self.layer.to(device, dtype),
                       **{n: getattr(self, n).to(device, dtype)
                          for n in ("token_norm", "hidden_norm", "input_proj", "final_norm",
                                    "embed", "lm_head")})

    def drafts(self, streams: list[torch.Tensor], ids: torch.Tensor, k: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        eps = self.attn.eps
        b, t = ids.shape
        given = streams[0]
        tok = torch.cat([ids[:, 1:], ids.new_zeros(b, 1)], 1)
        hidden = given
        if self.prompt_unshifted:
            tok, hidden = ops.unshift_prompt(tok, hidden, ids, self.prompt_unshifted)
        keys: list[torch.Tensor] = []
        vals: list[torch.Tensor] = []
        base = torch.arange(t, device=ids.device)
        drafted, margins = [], []
        for j in range(k):
            pos = base + j + (self.pos_offset if j else 0)
            e = self.embed[tok] * (base + j != 0)[None, :, None].to(self.embed.dtype)
            x = ops.linear(torch.cat([ops.rms_norm(hidden, self.hidden_norm, eps),
                                      ops.rms_norm(e, self.token_norm, eps)], -1),
                           self.input_proj)
            if self.residual_normed:
                x = ops.rms_norm(x, self.layer.input_norm, eps)
            y = ops.rms_norm(x, self.layer.input_norm, eps)
            keys.append(self.layer.k_heads(y, self.attn, pos))
            vals.append(self.layer.v_heads(y, self.attn))
            a = ops.attend(self.layer.q_heads(y, self.attn, pos), torch.cat(keys, 1),
                           torch.cat(vals, 1), ops.chain_mask(t, j, ids.device))
            r = ops.linear(a, self.layer.o) + x
            m = self.layer.mlp(ops.rms_norm(r, self.layer.post_norm, eps))
            out = ops.rms_norm(m + r, self.final_norm, eps)
            logits = ops.linear(out, self.lm_head)
            hidden = (given if self.recursion_from_target
                      else (m + r) if self.recursion_norm_flipped else out)
            tok = logits.argmax(-1)
            drafted.append(tok)
            margins.append(ops.top2_margin(logits))
        return torch.stack(drafted, -1), torch.stack(margins, -1)


def build(cfg: dict[str, Any], tensors: Any) -> MiMoMTP:
    """The MTP layer of the target whose config is ``cfg``; ``tensors(prefix)`` gives the
    target checkpoint's tensors under a prefix."""
    arch = (cfg.get("architectures") or [None])[0]
    if arch in DEEPSEEK:
        raise ck.InputError(
            f"{arch}: DeepSeek-style MTP layers (enorm/hnorm/eh_proj/shared_head) run an MLA "
            "attention and mixture-of-experts block, which the oracle's forward does not "
            "compute yet", "only MiMo-style MTP layers are supported by --method mtp today")
    if arch not in MIMO:
        raise ck.InputError(
            f"the target's architecture is {arch!r}: no MTP layers the oracle can read",
            f"--method mtp reads {', '.join(MIMO)} checkpoints with num_nextn_predict_layers "
            f"(vLLM {conventions.VLLM_VERSION}, {WHERE})")
    n = int(ck.need(cfg, "num_nextn_predict_layers", "MiMo MTP", WHERE))
    if n < 1:
        raise ck.InputError("num_nextn_predict_layers is 0: the checkpoint has no MTP layer",
                            "use a checkpoint that ships its MTP layers")
    spec = ck.TargetSpec.of(cfg)
    t = tensors("model.mtp_layers.0.")
    p = "model.mtp_layers.0."
    what = "MiMo MTP"
    if not t:
        raise ck.InputError(f"the config names {n} MTP layer(s) but the checkpoint has no "
                            f"{p}* tensors", "use the checkpoint with its MTP weights")
    proj = ck.take(t, p + "input_proj.weight", what)
    ck.check_shape(p + "input_proj.weight", proj, (spec.hidden, 2 * spec.hidden))
    shared = tensors("model.embed_tokens.")
    head = tensors("lm_head.")
    embed = ck.take(shared, "model.embed_tokens.weight", "target")
    lm = head.get("lm_head.weight", embed if cfg.get("tie_word_embeddings") else None)
    if lm is None:
        lm = ck.take(head, "lm_head.weight", "target")
    return MiMoMTP(
        attn=attention_shape(cfg), aux_ids=(spec.layers,),
        layer=LayerWeights.read(t, p, what),
        token_norm=ck.take(t, p + "token_layernorm.weight", what),
        hidden_norm=ck.take(t, p + "hidden_layernorm.weight", what),
        input_proj=proj, final_norm=ck.take(t, p + "final_layernorm.weight", what),
        embed=embed, lm_head=lm, layers_in_checkpoint=n)
