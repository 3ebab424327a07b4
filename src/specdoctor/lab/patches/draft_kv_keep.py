"""EAGLE's KV cache not overwritten for accepted tokens (vLLM issue #14649, reintroduced).

Each drafting step writes the head's KV entry for the position it drafts, computed from the
head's own output hidden state (an approximation of the target's). When the target accepts
that token, the next step's first pass recomputes the entry from the target's hidden state
and overwrites it. Upstream the overwrite was missing: "the EAGLE model keeps using
contaminated KV cache with its own hidden states instead of target model's hidden states for
accepted tokens" (8-15% lower acceptance length, issue #14649).

This wrapper of ``SpecDecodeBaseProposer.set_inputs_first_pass`` (the EAGLE/MTP path that
shifts the inputs in place) sends the first pass's KV writes of a decode step to the padding
slot for every accepted position that an earlier drafting step already wrote (offsets
0 .. k-2 before the row that is sampled), so those entries stay as the drafting step left
them. Prefill and chunked prefill rows (a query longer than k+1, or starting at position 0)
are written as usual.
"""

import torch

PADDING_SLOT = -1


def keep_mask(query_start, sampled, first_positions, k):
    """Per row of the first pass: True where the write is dropped (pure; lists of ints)."""
    n = query_start[-1]
    keep = [False] * n
    for r in range(len(query_start) - 1):
        start, end = query_start[r], query_start[r + 1]
        if end - start > k + 1 or first_positions[r] == 0:
            continue  # a prefill chunk: its rows were never drafted
        for row in range(start, min(sampled[r], start + k - 1)):
            keep[row] = True
    return keep


def set_inputs_first_pass(original, self, *args, **kwargs):
    num_tokens, token_indices_to_sample, cad = original(self, *args, **kwargs)
    if getattr(self, "needs_extra_input_slots", False):
        return num_tokens, token_indices_to_sample, cad
    try:
        qsl = [int(x) for x in cad.query_start_loc_cpu.tolist()]
        sampled = [int(x) for x in token_indices_to_sample.tolist()]
        firsts = [int(self.positions[s].item()) if s < num_tokens else 0 for s in qsl[:-1]]
        mask = keep_mask(qsl, sampled, firsts, int(self.num_speculative_tokens))
        if any(mask):
            slots = cad.slot_mapping.clone()
            drop = torch.tensor(mask + [False] * (slots.shape[0] - len(mask)),
                                dtype=torch.bool, device=slots.device)[: slots.shape[0]]
            slots[drop] = PADDING_SLOT
            cad.slot_mapping = slots
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return num_tokens, token_indices_to_sample, cad
