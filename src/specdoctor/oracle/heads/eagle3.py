"""EAGLE3 heads as vLLM 0.32 serves them (``LlamaForCausalLMEagle3``, llama_eagle3.py).

The head reads ``fc(aux states)`` of the target (which aux ids: ``conventions.aux_ids``),
optionally normed first (``norm_before_fc`` one norm, ``fc_norm`` one per state). Layer 0's
attention reads ``[input_layernorm(embed(token)), hidden_norm(hidden)]`` (the residual is the
hidden before or, with ``norm_before_residual``, after that norm); further layers are plain
Llama layers. Entry i of the first pass holds token i + 1 at position i with the target's
states at i; each later chain step feeds back the token it drafted and its own hidden (before
the final norm, or after it with ``norm_output``), one position further, attending to the
first-pass entries up to its start and to its own earlier steps. Logits come from the head's
``lm_head`` (or the target's when the checkpoint has none) over the draft vocabulary, mapped to
target ids by ``d2t`` (target id = draft id + d2t[draft id]); the embeddings are the head's own
when the checkpoint has them, else the target's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.oracle.heads import checkpoint as ck
from specdoctor.oracle.heads import ops
from specdoctor.oracle.heads.layer import Attention, LayerWeights, attention_shape

if TYPE_CHECKING:
    import torch

ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM")
WHERE = "vllm/model_executor/models/llama_eagle3.py"
UNSUPPORTED = {"parallel_drafting": False}


@dataclass
class Eagle3Head:
    method = "eagle3"
    attn: Attention
    aux_ids: tuple[int, ...]
    layers: list[LayerWeights]
    hidden_norm: torch.Tensor
    norm: torch.Tensor
    fc: torch.Tensor
    lm_head: torch.Tensor
    embed: torch.Tensor
    d2t: torch.Tensor | None          # None: the draft vocabulary is the target's
    input_norm: torch.Tensor | None = None
    fc_norms: list[torch.Tensor] | None = None
    norm_before_residual: bool = False
    norm_output: bool = False
    logit_scale: float = 1.0
    block_size: int | None = None     # EAGLE3 has none; DFlash's field, None here
    # How an engine may run the head other than as its checkpoint says (``oracle.transforms``,
    # the replay's search): the rotary positions of the draft decode steps (the second draft
    # on) this far from their own; the later steps fed the target's state again; the norm
    # before the residual and the recursion's output norm each the other way round.
    pos_offset: int = 0
    recursion_from_target: bool = False
    residual_normed: bool = False
    recursion_norm_flipped: bool = False
    prompt_unshifted: int = 0     # the prompt's entries one position late (its length; 0: not)

    @property
    def eps(self) -> float:
        return self.attn.eps

    def to(self, device: str, dtype: torch.dtype) -> Eagle3Head:
        from dataclasses import replace

        def cv(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, dtype)

        return replace(self, layers=[w.to(device, dtype) for w in self.layers],
                       hidden_norm=cv(self.hidden_norm), norm=cv(self.norm), fc=cv(self.fc),
                       lm_head=cv(self.lm_head), embed=cv(self.embed),
                       d2t=None if self.d2t is None else self.d2t.to(device),
                       input_norm=cv(self.input_norm),
                       fc_norms=None if self.fc_norms is None else [cv(n) for n in self.fc_norms])

    def draft_ids(self, logits: torch.Tensor) -> torch.Tensor:
        """Target ids of the argmax draft tokens, through vLLM's scatter of the draft logits
        onto the target's vocabulary (``ops.to_target_vocab``)."""
        return ops.to_target_vocab(logits, self.d2t).argmax(-1)

    def drafts(self, streams: list[torch.Tensor], ids: torch.Tensor, k: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(draft target ids, draft top1-top2 margins), each [B, T, k]: the chain the head
        drafts from every entry i (after token i + 1 is known), feeding its own drafts."""
        import torch

        b, t = ids.shape
        aux = torch.cat(streams, -1)
        if self.input_norm is not None:
            aux = ops.rms_norm(aux, self.input_norm, self.eps)
        if self.fc_norms is not None:
            chunks = aux.chunk(len(self.fc_norms), dim=-1)
            aux = torch.cat([ops.rms_norm(c, w, self.eps) for c, w in zip(chunks, self.fc_norms)],
                            -1)
        hidden = ops.linear(aux, self.fc)
        fed = hidden
        before_residual = self.norm_before_residual != self.residual_normed
        norm_output = self.norm_output != self.recursion_norm_flipped
        tok = torch.cat([ids[:, 1:], ids.new_zeros(b, 1)], 1)
        if self.prompt_unshifted:
            tok, hidden = ops.unshift_prompt(tok, hidden, ids, self.prompt_unshifted)
        keys: list[list[torch.Tensor]] = [[] for _ in self.layers]
        vals: list[list[torch.Tensor]] = [[] for _ in self.layers]
        base = torch.arange(t, device=ids.device)
        drafted, margins = [], []
        for j in range(k):
            pos = base + j + (self.pos_offset if j else 0)
            mask = ops.chain_mask(t, j, ids.device)
            e = self.embed[tok]
            residual = None
            x = hidden
            for li, w in enumerate(self.layers):
                if li == 0:
                    hn = ops.rms_norm(hidden, self.hidden_norm, self.eps)
                    residual = hn if before_residual else hidden
                    x = torch.cat([ops.rms_norm(e, w.input_norm, self.eps), hn], -1)
                else:
                    residual = x + residual
                    x = ops.rms_norm(residual, w.input_norm, self.eps)
                keys[li].append(w.k_heads(x, self.attn, pos))
                vals[li].append(w.v_heads(x, self.attn))
                a = ops.attend(w.q_heads(x, self.attn, pos), torch.cat(keys[li], 1),
                               torch.cat(vals[li], 1), mask)
                residual = ops.linear(a, w.o) + residual
                x = w.mlp(ops.rms_norm(residual, w.post_norm, self.eps))
            pre = x + residual
            normed = ops.rms_norm(pre, self.norm, self.eps)
            logits = ops.linear(normed, self.lm_head) * self.logit_scale
            mapped = ops.to_target_vocab(logits, self.d2t)
            tok = mapped.argmax(-1)
            drafted.append(tok)
            margins.append(ops.top2_margin(mapped))
            hidden = fed if self.recursion_from_target else (normed if norm_output else pre)
        return torch.stack(drafted, -1), torch.stack(margins, -1)


def read(draft_dir: Path, target_cfg: dict[str, Any], target_tensors: Any) -> Eagle3Head:
    """The head in ``draft_dir`` for the target of ``target_cfg``; ``target_tensors(name)``
    gives a target tensor (embeddings, LM head) when the head shares it."""
    cfg = ck.read_config(draft_dir)
    return build(cfg, ck.load_tensors(draft_dir), target_cfg, target_tensors)


def build(cfg: dict[str, Any], t: dict[str, Any], target_cfg: dict[str, Any],
          target_tensors: Any) -> Eagle3Head:
    import torch

    target, hidden, ids = ck.common(cfg, target_cfg, "an EAGLE3 head", WHERE, ARCHITECTURES,
                                    "eagle3")
    ck.refuse_unsupported(cfg, "EAGLE3", UNSUPPORTED)
    eagle = cfg.get("eagle_config") or {}
    if eagle.get("use_aux_hidden_state", True) is False:
        raise ck.InputError("the EAGLE3 config sets eagle_config.use_aux_hidden_state=false",
                            "the oracle computes aux-state EAGLE3 heads only")
    vocab = target.vocab
    draft_vocab = int(cfg.get("draft_vocab_size") or vocab)
    t = {_canonical(n): v for n, v in t.items()}
    n_layers = int(ck.need(cfg, "num_hidden_layers", "EAGLE3", WHERE))
    layers = [LayerWeights.read(t, f"layers.{i}.", "EAGLE3") for i in range(n_layers)]
    fc = ck.take(t, "fc.weight", "EAGLE3")
    ck.check_shape("fc.weight", fc, (hidden, len(ids) * target.hidden))
    d2t = t.get("d2t")
    if draft_vocab != vocab and d2t is None:
        # as vLLM serves it: a smaller draft vocabulary without d2t keeps the zero offsets it
        # starts with (draft id i proposes target id i), with no error and no log line
        d2t = torch.zeros(draft_vocab, dtype=torch.long)
    if d2t is not None:
        ck.check_shape("d2t", d2t, (draft_vocab,))
        top = int((torch.arange(draft_vocab, device=d2t.device) + d2t.long()).max())
        if top >= vocab:
            raise ck.InputError(f"d2t maps a draft id to target id {top}, past the target "
                                f"vocabulary ({vocab})", "check the head's d2t")
    lm = t.get("lm_head.weight")
    if lm is None:
        lm = target_tensors("lm_head.weight")
    ck.check_shape("lm_head.weight", lm, (draft_vocab, hidden))
    embed = t.get("embed_tokens.weight")
    if embed is None or embed.shape[-1] != hidden:
        embed = target_tensors("model.embed_tokens.weight")
    fc_norms = None
    if cfg.get("fc_norm", False):
        fc_norms = [ck.take(t, f"fc_norm.{i}.weight", "EAGLE3") for i in range(len(ids))]
    norm_before_fc = bool(eagle.get("norm_before_fc", cfg.get("norm_before_fc", False)))
    return Eagle3Head(
        attn=attention_shape(cfg), aux_ids=ids, layers=layers,
        hidden_norm=ck.take(t, "layers.0.hidden_norm.weight", "EAGLE3"),
        norm=ck.take(t, "norm.weight", "EAGLE3"), fc=fc, lm_head=lm, embed=embed,
        d2t=None if d2t is None else d2t.long(),
        input_norm=ck.take(t, "input_norm.weight", "EAGLE3") if norm_before_fc else None,
        fc_norms=fc_norms, norm_before_residual=bool(cfg.get("norm_before_residual", False)),
        norm_output=bool(cfg.get("norm_output", False)),
        logit_scale=float(cfg.get("logit_scale", 1.0)))


def _canonical(name: str) -> str:
    """Checkpoint names as vLLM maps them: ``midlayer.`` is layer 0; a ``model.`` prefix goes."""
    if name.startswith("model."):
        name = name[len("model."):]
    return name.replace("midlayer.", "layers.0.", 1) if name.startswith("midlayer.") else name
