"""The n-gram proposer's context one token short: the other direction of ngram_twice.py.

vllm-ascend's proposer (PRs #2972, #11323) looked up over a context that held the tokens
sampled this step twice, because it wrote them again at an offset the runner had already
advanced. Its mirror image is a proposer that reads the context length from before the runner
wrote them: the lookup then ends one token early, at the token before the one just sampled,
and what it proposes starts with that sampled token again.

This replacement of vLLM 0.32's ``NgramProposer.propose`` hands the original the context
lengths of the requests that sampled this step lowered by one. The engine's own buffers are not
touched.
"""

import numpy as np


def propose(original, self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
            token_ids_cpu, *args, **kwargs):
    try:
        lengths = np.array(num_tokens_no_spec, copy=True)
        for i, sampled in enumerate(sampled_token_ids):
            if len(sampled) and lengths[i] > 1:
                lengths[i] -= 1
        return original(self, num_speculative_tokens, sampled_token_ids, lengths, token_ids_cpu,
                        *args, **kwargs)
    except Exception:  # noqa: BLE001 - leave the step as it was
        return original(self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
                        token_ids_cpu, *args, **kwargs)
