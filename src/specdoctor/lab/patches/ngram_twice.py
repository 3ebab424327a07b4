"""The n-gram proposer's context with the sampled tokens written twice (vllm-ascend #2972,
#11323), and three times (its sibling at another size, ``propose_thrice``).

vllm-ascend's ``AscendNgramProposer.propose`` wrote the tokens sampled this step into the
request's token buffer itself, at ``num_tokens_no_spec``, although the model runner had already
written them there and advanced ``num_tokens_no_spec``: the sampled tokens landed a second
time right after themselves, and the lookup ran over ``tokens[:num_tokens_no_spec + n]``, a
context ending in the sampled tokens twice ("redundantly adds sampled_ids ... causing incorrect
indexing", PR #2972; fixed again in PR #11323). The suffix n-gram the proposer matches is then
one the text never had, so it proposes from the wrong place, or not at all.

These replacements of vLLM 0.32's ``NgramProposer.propose`` hand the original a copy of the
token buffer with each request's sampled tokens appended once (twice) more after its context,
and the context lengths grown to match. The engine's own buffer is not touched.
"""

import numpy as np


def _appended(times, original, self, num_speculative_tokens, sampled_token_ids,
              num_tokens_no_spec, token_ids_cpu, *args, **kwargs):
    try:
        tokens = np.array(token_ids_cpu, copy=True)
        lengths = np.array(num_tokens_no_spec, copy=True)
        for i, sampled in enumerate(sampled_token_ids):
            n = len(sampled)
            for _ in range(times):
                start = int(lengths[i])
                if n and start + n <= tokens.shape[1]:
                    tokens[i, start:start + n] = sampled
                    lengths[i] = start + n
        return original(self, num_speculative_tokens, sampled_token_ids, lengths, tokens,
                        *args, **kwargs)
    except Exception:  # noqa: BLE001 - leave the step as it was
        return original(self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
                        token_ids_cpu, *args, **kwargs)


def propose(original, self, *args, **kwargs):
    return _appended(1, original, self, *args, **kwargs)


def propose_thrice(original, self, *args, **kwargs):
    return _appended(2, original, self, *args, **kwargs)
