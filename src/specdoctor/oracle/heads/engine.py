"""A correct engine's steps with a hidden-state drafter.

**Greedy** (``greedy_traces``): the emitted text is the target's greedy text whatever the
drafts, so the target decodes once, recording the streams the drafter reads; the drafter then
computes, in one batched pass per chain step, the k drafts it proposes from every start; and
the engine's steps follow by walking the text: a step from start p accepts the leading drafts
equal to the greedy tokens, emits those plus one, and the next step starts after them. The
cost is one plain greedy decode of the target plus k drafter passes over the text.

**Sampled** (``HeadDrafter``): the trajectory depends on the draws, so ``simulate`` runs it
step by step; at each step the drafter reads the target's streams over the current context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specdoctor.oracle.heads.target import Decoded, StreamTarget
from specdoctor.oracle.simulate import RequestTrace, Step
from specdoctor.oracle.transforms import TAP_KNOBS

if TYPE_CHECKING:
    import torch

    from specdoctor.oracle.heads import Head
    from specdoctor.oracle.transforms import Transform


def new_tokens(k: int, max_tokens: int) -> int:
    """Tokens to decode so the last step's drafts can all be judged."""
    return max_tokens + k + 2


def greedy_traces(target: StreamTarget, head: Head, prompts: Sequence[Sequence[int]], k: int,
                  max_tokens: int, device: str, batch: int = 1, first_index: int = 0
                  ) -> list[RequestTrace]:
    """One trace per prompt, in order; prompts of equal length are decoded ``batch`` at a time
    (no padding, so batching changes no number)."""
    import torch

    order: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        order.setdefault(len(p), []).append(i)
    out: dict[int, RequestTrace] = {}
    for idx in order.values():
        for s in range(0, len(idx), batch):
            group = idx[s:s + batch]
            ids = torch.tensor([list(prompts[i]) for i in group], device=device)
            dec = target.decode(ids, new_tokens(k, max_tokens))
            with torch.inference_mode():
                drafts, margins = head.drafts(dec.streams, dec.ids[:, :-1], k)
            for row, i in enumerate(group):
                out[i] = walk(dec, row, drafts[row].cpu(), margins[row].cpu(), k, max_tokens,
                              first_index + i)
    return [out[i] for i in range(len(prompts))]


def step_walk(runs: Sequence[int], start: int, k: int, max_tokens: int) -> list[int]:
    """Accepted drafts of each step of one greedy request, given ``runs[p]``: how many leading
    drafts from start p are right. The prefill emits one token; a step from p accepting ``a``
    emits ``a + 1`` and the next starts at p + a + 1, until ``max_tokens`` exist."""
    steps: list[int] = []
    produced, p = 1, start
    while produced < max_tokens and p < len(runs):
        a = min(int(runs[p]), k)
        steps.append(a)
        produced += a + 1
        p += a + 1
    return steps


def walk(dec: Decoded, row: int, drafts: torch.Tensor, draft_margins: torch.Tensor, k: int,
         max_tokens: int, prompt_index: int) -> RequestTrace:
    """The engine's steps on one decoded request (entry p: after token p + 1 is known)."""
    ids = dec.ids[row].tolist()
    tm = dec.margins[row].float().cpu().tolist()
    d = drafts.tolist()
    dm = draft_margins.float().tolist()
    right = [[a == b for a, b in zip(d[p], ids[p + 2:p + 2 + k])] for p in range(len(d))]
    runs = [r.index(False) if False in r else len(r) for r in right]
    p, produced = dec.prompt_len - 1, 1
    steps: list[Step] = []
    for a in step_walk(runs, p, k, max_tokens):
        steps.append(Step(position=produced, drafted=k, drafts=list(d[p]),
                          betas=[1.0 if r else 0.0 for r in right[p]], accepted=a,
                          emitted=ids[p + 2:p + 3 + a], target_margin=tm[p + 1:p + 2 + k],
                          draft_margin=dm[p]))
        produced += a + 1
        p += a + 1
    prompt = ids[:dec.prompt_len]
    return RequestTrace(prompt_index, 0, prompt, ids[dec.prompt_len:dec.prompt_len + max_tokens],
                        steps)


class HeadDrafter:
    """A simulate drafter (``argmax_chain``) for sampled runs and engine replays: the target's
    streams over the whole context, then the head's chain from its last token."""

    def __init__(self, target: StreamTarget, head: Head, device: str) -> None:
        self.target, self.head, self.device = target, head, device
        self.forwards = 0
        # every layer's stream of the last context a transformed chain read (``_layers``)
        self._every: tuple[tuple[int, ...], list[torch.Tensor],
                           dict[int, torch.Tensor]] | None = None
        # the head as each transformation edits it (None: nothing to edit), made once
        self._edits: tuple[Head | None, dict[str, Head | None]] = (None, {})

    def reset(self) -> None:
        pass

    def argmax_chain(self, ids: Sequence[int], k: int) -> tuple[list[int], list[float]]:
        import torch

        if len(ids) < 2:
            return [], []
        x = torch.tensor([list(ids)], device=self.device)
        streams, _ = self.target.features(x)
        with torch.inference_mode():
            d, m = self.head.drafts(streams, x, k)
        self.forwards += 1
        return d[0, -2].tolist(), m[0, -2].float().tolist()

    def chain_shifted(self, ids: Sequence[int], k: int, offset: int) -> list[int]:
        """The argmax chain with the head's drafting positions ``offset`` away from their own
        (the head's ``pos_offset``: EAGLE3 and MTP the draft decode steps after the first, as a
        draft model's; DFlash the whole block's queries, which it drafts in one pass)."""
        from specdoctor.oracle.transforms import position

        return self.chain_with(ids, k, position(offset)) or []

    def chain_with(self, ids: Sequence[int], k: int, t: Transform,
                   prompt: int | None = None) -> list[int] | None:
        """The argmax chain of the head run as transformation ``t`` says
        (``oracle.transforms``; ``prompt``: how many of ``ids`` are the request's prompt);
        None where ``t`` changes nothing for this head (a weight it already shares with the
        target, a window it does not have), does not apply, or needs the prompt's length."""
        import torch
        from dataclasses import replace

        if len(ids) < 2 or not t.applies_to(self.head.method):
            return None
        if t.knob == "prompt_unshifted":
            if not prompt or not hasattr(self.head, t.knob):
                return None
            head: Head | None = replace(self.head, prompt_unshifted=prompt)  # type: ignore
        else:
            if self._edits[0] is not self.head:  # made for another head: start again
                self._edits = (self.head, {})
            if t.id not in self._edits[1]:       # the same edit for every context
                self._edits[1][t.id] = self._edited(t)
            head = self._edits[1][t.id]
        if head is None:
            return None
        x = torch.tensor([list(ids)], device=self.device)
        streams = self._streams(x, t)
        if streams is None:
            return None
        with torch.inference_mode():
            d, _ = head.drafts(streams, x, k)
        self.forwards += 1
        return d[0, -2].tolist()

    def _edited(self, t: Transform) -> Head | None:
        h: Head | None = self.head
        for part in t.parts or (t,):
            if h is None or part.knob == "prompt_unshifted":
                return None          # the prompt's pairing is made per context, never composed
            h = self._edit(h, part)
        return h

    def _edit(self, h: Head, t: Transform) -> Head | None:
        from dataclasses import replace

        import torch

        if t.knob == "positions":
            return replace(h, pos_offset=int(t.value))   # type: ignore[type-var]
        if t.knob in TAP_KNOBS:
            return h
        if t.knob in ("embed_from_target", "head_from_target"):
            name = "embed" if t.knob == "embed_from_target" else "lm_head"
            own = getattr(h, name)
            model = self.target.model
            full = (model.get_input_embeddings() if name == "embed"
                    else model.get_output_embeddings()).weight
            theirs = full[: own.shape[0]].to(own.device, own.dtype)
            if theirs.shape != own.shape or torch.equal(theirs, own):
                return None                               # shared already: nothing to replace
            return replace(h, **{name: theirs})           # type: ignore[type-var]
        if t.knob in ("causal_flipped", "window_dropped"):
            att = getattr(h, "attention", None)
            if att is None:
                return None
            if t.knob == "window_dropped":
                if not any(w for w, _ in att):
                    return None
                return replace(h, attention=[(None, c) for _, c in att])  # type: ignore
            return replace(h, attention=[(w, not c) for w, c in att])  # type: ignore[type-var]
        if t.knob == "context_norm_from":
            layers = getattr(h, "layers", [])
            if len(layers) < 2 or layers[int(t.value)].k_norm is None or all(
                    w.k_norm is not None and torch.equal(w.k_norm, layers[int(t.value)].k_norm)
                    for w in layers):
                return None                               # one norm for every layer already
        if not hasattr(h, t.knob):
            return None
        return replace(h, **{t.knob: t.value})           # type: ignore[type-var]

    def _streams(self, x: torch.Tensor, t: Transform) -> list[torch.Tensor] | None:
        """The target states the head reads, as transformation ``t`` feeds them: every layer's
        stream recorded once per context (``_layers``), the head's own ids read from it."""
        import torch

        if t.parts:
            taps = [p for p in t.parts if p.knob in TAP_KNOBS]
            if len(taps) > 1:
                return None
            t = taps[0] if taps else t
        every, mids = self._layers(x)
        ids = self.head.aux_ids
        if t.knob == "tap_shift":
            moved = [i + int(t.value) for i in ids]
            if not all(0 <= i < len(every) for i in moved):
                return None
            return [every[i] for i in moved]
        if t.knob == "tap_mlp_share":
            if all(i < 1 for i in ids) or any(mids.get(i - 1) is None for i in ids if i >= 1):
                return None
            # the tapped layer's state after attention plus a share of what its MLP adds (the
            # embeddings, tap 0, are no layer's output and stay as they are)
            share = float(t.value)
            return [every[i] if i < 1 else mids[i - 1] + share * (every[i] - mids[i - 1])
                    for i in ids]
        streams = [every[i] for i in ids]
        if t.knob == "tap_lag":
            lag = int(t.value)
            return [torch.cat([torch.zeros_like(s[:, :lag]), s[:, :-lag]], 1) for s in streams]
        return streams

    def _layers(self, x: torch.Tensor) -> tuple[list[torch.Tensor], dict[int, torch.Tensor]]:
        """Every layer's stream of one context (``StreamTarget``'s ids 0..L), and each layer's
        state after its attention (the input of its ``post_attention_layernorm``, where the
        layer has one), recorded once per context."""
        key = tuple(x[0].tolist())
        if self._every is None or self._every[0] != key:
            layers = self.target.layers
            mids: dict[int, torch.Tensor] = {}

            def keep(i: int) -> Any:
                def hook(_m: Any, args: Any) -> None:
                    mids[i] = args[0]
                return hook

            # where the layer norms its attention output before the add (a layer with a
            # pre_feedforward_layernorm, Gemma's), that norm's input is no residual: none
            hooks = [layer.post_attention_layernorm.register_forward_pre_hook(keep(i))
                     for i, layer in enumerate(layers)
                     if hasattr(layer, "post_attention_layernorm")
                     and not hasattr(layer, "pre_feedforward_layernorm")]
            try:
                streams, _ = StreamTarget(self.target.model, range(len(layers) + 1)).features(x)
            finally:
                for h in hooks:
                    h.remove()
            self.target.forwards += 1
            self._every = (key, streams, mids)
        return self._every[1], self._every[2]

    def logits(self, ids: Sequence[int]) -> Any:
        from specdoctor.errors import InputError

        raise InputError("sampled drafts (--draft-sampling probabilistic) are not computed for "
                         "hidden-state drafters", "use --draft-sampling argmax (vLLM's default)")
