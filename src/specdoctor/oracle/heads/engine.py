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

if TYPE_CHECKING:
    import torch

    from specdoctor.oracle.heads import Head


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
        from dataclasses import replace

        head = self.head
        try:
            self.head = replace(head, pos_offset=offset)
            return self.argmax_chain(ids, k)[0]
        finally:
            self.head = head

    def logits(self, ids: Sequence[int]) -> Any:
        from specdoctor.errors import InputError

        raise InputError("sampled drafts (--draft-sampling probabilistic) are not computed for "
                         "hidden-state drafters", "use --draft-sampling argmax (vLLM's default)")
