"""The per-request last-token draft input written for the batch's last request only (SGLang
PR #27647, PR #27846).

An EAGLE-style drafter's first pass reads the target's tokens shifted by one, and each request's
last slot must then be overwritten with the token just sampled for it. SGLang's EAGLE3 draft
models (kimi-k2.5 MLA, ``llama_eagle3.py``, Qwen3.5 MTP) did that overwrite in their multimodal
extend path at the last position of the whole flattened batch only (``input_ids[-1]``): with
one request it is right, with several, requests 0..N-2 kept a stale input at their last-token
position ("no crash, but wrong draft inputs and degraded acceptance rates", PR #27647; fixed for
each sequence via ``extend_start_loc + extend_seq_lens - 1``, PR #27846).

vLLM 0.32's ``SpecDecodeBaseProposer.set_inputs_first_pass`` shifts ``target_token_ids`` into
``self.input_ids`` and writes ``next_token_ids`` at every request's ``token_indices_to_sample``.
This wrapper runs it, then puts back, at every request's slot but the batch's last, the token
the shift left there (the target's token one position further in the flattened batch), so only
the last request drafts from the token it sampled, as in SGLang before the fix. Token ids stand
in for SGLang's multimodal embeddings; the index mistake is the same. Drafters that need extra
input slots (draft_model, DFlash) take the other branch and are left as they are.
"""


def stale_slots(sample_indices, num_tokens):
    """The sample slots that keep the shifted token: every request's but the batch's last (and
    none past the flattened batch's end, where the shift wrote nothing)."""
    return [int(i) for i in list(sample_indices)[:-1] if int(i) + 1 < num_tokens]


def first_pass(original, self, target_token_ids, next_token_ids, target_positions,
               target_hidden_states, token_indices_to_sample, cad, *args, **kwargs):
    out = original(self, target_token_ids, next_token_ids, target_positions,
                   target_hidden_states, token_indices_to_sample, cad, *args, **kwargs)
    try:
        if not self.needs_extra_input_slots:
            slots = stale_slots(out[1].tolist(), target_token_ids.shape[0])
            if slots:
                import torch

                at = torch.tensor(slots, dtype=torch.long, device=self.input_ids.device)
                self.input_ids[at] = target_token_ids[at + 1].to(self.input_ids.dtype)
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out
