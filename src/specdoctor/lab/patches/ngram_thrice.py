"""The n-gram proposer's context with the sampled tokens written three times: ngram_twice.py
at another size.

As in vllm-ascend PRs #2972 and #11323, the tokens sampled this step land again after
themselves before the lookup; here twice more, so the context the proposer matches ends in
them three times.

This replacement of vLLM 0.32's ``NgramProposer.propose`` hands the original a copy of the
token buffer with each request's sampled tokens appended twice more after its context, and the
context lengths grown to match. The engine's own buffer is not touched.
"""

import numpy as np


def propose(original, self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
            token_ids_cpu, *args, **kwargs):
    try:
        tokens = np.array(token_ids_cpu, copy=True)
        lengths = np.array(num_tokens_no_spec, copy=True)
        for i, sampled in enumerate(sampled_token_ids):
            n = len(sampled)
            for _ in range(2):
                start = int(lengths[i])
                if n and start + n <= tokens.shape[1]:
                    tokens[i, start:start + n] = sampled
                    lengths[i] = start + n
        return original(self, num_speculative_tokens, sampled_token_ids, lengths, tokens,
                        *args, **kwargs)
    except Exception:  # noqa: BLE001 - leave the step as it was
        return original(self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
                        token_ids_cpu, *args, **kwargs)
