"""The draft's chunk-tail token taken from the target's prediction (SGLang PR #26329, PR #26800;
the same mistake in LightLLM's MTP, ModelTC/LightLLM PR #1079).

An EAGLE-style drafter's first pass reads the target's tokens shifted left by one, with each
request's last slot filled by "the next token": for a finished prefill or a decode step, the
token the target just sampled. When a prompt is prefilled in chunks, the last slot of a chunk
that is not the prompt's last must hold the prompt's next token (the first of the next chunk),
which the target will read there. SGLang wrote the target's prediction at the chunk's end
instead (``rotated[seg_ends] = next_token_ids`` for every segment), so "the chunked path writes
a different token at the chunk boundary than the single-chunk path writes at the same seq
position" and the draft's KV at every chunk boundary was built from a token the text does not
have (PR #26329; fixed by tracking the chunked request's next prompt token, PR #26800; PR
#28254 fixes the same for a request resumed after retraction, whose boundary can fall in its
output).

vLLM 0.32 marks such requests in the runner's ``discard_request_mask`` (their sampled token is
thrown away) and ``SpecDecodeBaseProposer.prepare_next_token_ids_padded`` gives them a "backup"
next token, the request's own next token id. This wrapper runs it, then, for every discarded
request whose row of ``sampled_token_ids`` holds a token, puts the token the target sampled at
the chunk's tail in place of the backup, as SGLang did before the fix. The count of valid
sampled tokens is left as computed (vLLM still treats the request as not sampled). A drafter
that reads the target's tokens unshifted (draft_model) writes the tail token one position past
the chunk, where the next chunk writes again, so only EAGLE-style drafters keep the mistake.
Inert unless a prompt is prefilled in more than one chunk (``--max-num-batched-tokens`` below
the prompt's length). Measured on the lab's trained EAGLE3 head, it moves nothing beyond noise
(benchmarks/clinic/upstream.py, DROPPED).
"""


def predicted_tails(discard, sampled_first, vocab_size):
    """Rows that take the target's prediction: discarded, with a sampled token in the vocab.
    Pure over lists (the wrapper applies it to tensors)."""
    return [bool(d) and 0 <= int(t) < int(vocab_size) for d, t in zip(discard, sampled_first)]


def next_token_ids(original, self, sampled_token_ids, requests, gpu_input_batch,
                   discard_request_mask, *args, **kwargs):
    out = original(self, sampled_token_ids, requests, gpu_input_batch, discard_request_mask,
                   *args, **kwargs)
    try:
        import torch

        ids, counts = out
        n = ids.shape[0]
        first = sampled_token_ids[:n, 0]
        rows = predicted_tails(discard_request_mask[:n].tolist(), first.tolist(),
                               gpu_input_batch.vocab_size)
        if any(rows):
            at = torch.tensor(rows, dtype=torch.bool, device=ids.device)
            ids = torch.where(at, first.to(ids.dtype), ids)
            out = (ids, counts)
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out
