"""The head's first-draft slot at every greedy position, beside the target's next token.

For ``oracle.slotmap``: one greedy decode of the target per prompt (as the greedy oracle does),
then one pass of the head with its draft-vocabulary argmax left unmapped. Only heads that draft
in a vocabulary of their own (EAGLE3 with ``d2t``) have slots to learn.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from specdoctor.oracle.slotmap import SlotPairs

if TYPE_CHECKING:
    from specdoctor.oracle.heads import Head
    from specdoctor.oracle.runner import OracleConfig


def first_slot_pairs(config: OracleConfig) -> tuple[np.ndarray | None, list[SlotPairs]]:
    """The target id behind each slot as the engine maps it (None, and no pairs: the head
    drafts in the target's vocabulary), and per prompt the head's first-draft slot at each
    position the target decoded greedily beside the token the target chose there."""
    from specdoctor.oracle import heads
    from specdoctor.oracle.models import param_count, pick_device
    from specdoctor.oracle.runner import cpu_threads, torch_threads

    head = heads.load(config.method, config.target, config.draft)
    d2t = getattr(head, "d2t", None)
    if d2t is None:
        return None, []
    d = d2t.long().cpu().numpy()
    device = pick_device(config.device)
    dirs = [config.target] + ([config.draft] if config.draft is not None else [])
    with torch_threads(device, cpu_threads(config, sum(param_count(x) for x in dirs))):
        return np.arange(len(d)) + d, _pairs(config, head, device)


def _pairs(config: OracleConfig, head: Head, device: str) -> list[SlotPairs]:
    import torch

    from specdoctor.oracle.heads.engine import new_tokens
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import load_model, load_tokenizer

    head = replace(head.to(device, getattr(torch, config.dtype)), d2t=None)  # raw slots
    tok = load_tokenizer(config.tokenizer or config.target)
    target = StreamTarget(load_model(config.target, device, config.dtype), head.aux_ids)
    out: list[SlotPairs] = []
    for i, prompt in enumerate(config.prompts):
        ids = torch.tensor([list(tok(prompt)["input_ids"])], device=device)
        dec = target.decode(ids, new_tokens(1, config.max_tokens))
        with torch.inference_mode():
            drafts, _ = head.drafts(dec.streams, dec.ids[:, :-1], 1)
        seq = dec.ids[0].cpu().numpy()
        slots = drafts[0, :, 0].cpu().numpy()
        # entry p proposes token p + 2; keep the entries whose next token the target chose
        first = dec.prompt_len - 1
        last = max(first, min(len(slots), len(seq) - 2))
        out.append(SlotPairs(i, slots[first:last].astype(np.int64),
                             seq[first + 2:last + 2].astype(np.int64)))
    return out
