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
    from specdoctor.oracle.runner import OracleConfig


def served_targets(config: OracleConfig) -> np.ndarray | None:
    """The target id behind each slot as the engine maps it (None: no map, the head drafts
    in the target's vocabulary)."""
    from specdoctor.oracle import heads

    head = heads.load(config.method, config.target, config.draft)
    d2t = getattr(head, "d2t", None)
    if d2t is None:
        return None
    d = d2t.long().cpu().numpy()
    return np.arange(len(d)) + d


def first_slot_pairs(config: OracleConfig) -> list[SlotPairs]:
    """Per prompt, the head's first-draft slot at each position the target decoded greedily
    and the token the target chose there."""
    import torch

    from specdoctor.oracle.models import param_count, pick_device
    from specdoctor.oracle.runner import cpu_threads

    device = pick_device(config.device)
    before = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(cpu_threads(config, param_count(config.target)))
    try:
        return _pairs(config, device)
    finally:
        torch.set_num_threads(before)


def _pairs(config: OracleConfig, device: str) -> list[SlotPairs]:
    import torch

    from specdoctor.oracle import heads
    from specdoctor.oracle.heads.engine import new_tokens
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import load_model, load_tokenizer

    head = heads.load(config.method, config.target, config.draft)
    if getattr(head, "d2t", None) is None:
        return []
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
        last = min(len(slots), len(seq) - 2)
        last = max(first, last)
        out.append(SlotPairs(i, slots[first:last].astype(np.int64),
                             seq[first + 2:last + 2].astype(np.int64)))
    return out
