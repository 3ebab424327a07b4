"""Rejection sampling with the request's temperature applied twice (vllm-ascend PR #6685's
family; the other direction of vLLM PR #10198, which judged drafts with no temperature).

The verifier must judge each draft on the distribution the request asked for. Where an engine
scales the target's logits by the temperature once in its own path and again in a shared
helper (the softmax-twice bug of vllm-ascend PR #6685 is the same double processing), drafts
are judged on logits / T^2: at T < 1 a sharper distribution than asked, so argmax drafts are
accepted more often than a correct verifier accepts them, and the output is colder than asked.

vLLM 0.32's ``apply_sampling_constraints`` divides the logits by the temperature, then applies
top-k/top-p. This replacement divides them by the temperature first and then runs it. Greedy
requests are unaffected.

Loaded by the probe runtime as a ``replace``: ``constraints(original, logits,
cu_num_draft_tokens, sampling_metadata)``.
"""


def constraints(original, logits, cu_num_draft_tokens, sampling_metadata):
    if not sampling_metadata.all_greedy:
        from vllm.v1.sample import rejection_sampler as rs

        t = rs.expand_batch_to_tokens(sampling_metadata.temperature, cu_num_draft_tokens,
                                      logits.shape[0], replace_from=0, replace_to=1)
        logits = logits / t.unsqueeze(-1)
    return original(logits, cu_num_draft_tokens, sampling_metadata)
