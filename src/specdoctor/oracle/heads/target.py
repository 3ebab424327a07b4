"""The target's own forward (transformers), with the residual streams a drafter reads.

Stream i is what vLLM calls aux hidden state i (``conventions``): the input of layer i, so 0 is
the embeddings and L the last layer's output before the final norm. Hooks on the decoder layers
record them while the target decodes greedily, so the oracle pays for one plain greedy decode
of the target plus the drafter's passes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specdoctor.oracle.heads import ops

if TYPE_CHECKING:
    import torch


@dataclass
class Decoded:
    """A group of equal-length prompts decoded greedily, with the target's view of the text."""

    ids: torch.Tensor             # [B, T]: prompt then greedy tokens
    streams: list[torch.Tensor]   # per aux id, [B, T - 1, H]: every fed position
    margins: torch.Tensor         # [B, T - 1]: top1 - top2 of the target's logits there
    prompt_len: int


class StreamTarget:
    """A transformers causal LM whose layer streams can be recorded."""

    def __init__(self, model: Any, aux_ids: Sequence[int]) -> None:
        self.model = model
        self.aux_ids = tuple(aux_ids)
        self.forwards = 0

    @property
    def layers(self) -> Any:
        inner = getattr(self.model, "model", self.model)
        return inner.layers

    @contextmanager
    def recording(self) -> Iterator[dict[int, list[torch.Tensor]]]:
        got: dict[int, list[torch.Tensor]] = {i: [] for i in self.aux_ids}
        layers = self.layers
        hooks = []

        def keep_input(_m: Any, args: Any, kwargs: Any) -> None:
            got[0].append(kwargs["hidden_states"] if "hidden_states" in kwargs else args[0])

        def keep(i: int) -> Any:
            def hook(_m: Any, _args: Any, _kwargs: Any, output: Any) -> None:
                got[i].append(output[0] if isinstance(output, tuple) else output)
            return hook

        if 0 in got:
            hooks.append(layers[0].register_forward_pre_hook(keep_input, with_kwargs=True))
        for i in self.aux_ids:
            if i >= 1:
                hooks.append(layers[i - 1].register_forward_hook(keep(i), with_kwargs=True))
        try:
            yield got
        finally:
            for h in hooks:
                h.remove()

    def features(self, ids: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Streams [B, T, H] per aux id and logits [B, T, V] of one full forward."""
        import torch

        with self.recording() as got, torch.inference_mode():
            logits = self.model(input_ids=ids).logits
        self.forwards += 1
        return [got[i][0] for i in self.aux_ids], logits

    def decode(self, prompts: torch.Tensor, new_tokens: int) -> Decoded:
        """Greedy decode of ``prompts`` [B, P] by ``new_tokens``, recording every stream."""
        import torch

        ids = prompts
        margins = []
        with self.recording() as got, torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True)
            self.forwards += 1
            for step in range(new_tokens):
                last = out.logits[:, -1:]
                margins.append(ops.top2_margin(out.logits))
                nxt = last.argmax(-1)
                ids = torch.cat([ids, nxt], 1)
                if step < new_tokens - 1:
                    out = self.model(input_ids=nxt, past_key_values=out.past_key_values,
                                     use_cache=True)
                    self.forwards += 1
        streams = [torch.cat(got[i], 1) for i in self.aux_ids]
        return Decoded(ids, streams, torch.cat(margins, 1), prompts.shape[1])
