"""Rejection sampling on softmax(softmax(logits)) (vllm-ascend PR #6685).

vLLM PR #32852 moved the softmax into ``rejection_sample``, which from then on takes the
target's logits. vllm-ascend's copy kept passing the target's probabilities to it, so drafts
were judged (and recovered tokens drawn) on the softmax of probabilities, a distribution close
to uniform: "sampling with temperature will incur accuracy problem where tokens can be accepted
or rejected unreasonably". Greedy requests were unaffected (the argmax is the same).

vLLM 0.32's ``RejectionSampler.forward`` passes the output of ``apply_sampling_constraints``
(temperature, top-k/top-p applied to the logits) to ``rejection_sample``. This replacement
returns that output as probabilities (its softmax) for any batch that is not all greedy, so
``rejection_sample`` softmaxes it a second time, as it did on vllm-ascend.

Loaded by the probe runtime as a ``replace``: ``constraints(original, logits,
cu_num_draft_tokens, sampling_metadata)``.
"""


def constraints(original, logits, cu_num_draft_tokens, sampling_metadata):
    import torch

    out = original(logits, cu_num_draft_tokens, sampling_metadata)
    if sampling_metadata.all_greedy:
        return out
    return out.softmax(dim=-1, dtype=torch.float32)
