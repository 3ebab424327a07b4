"""The n-gram proposer's length check with a bound far below the model's context: vLLM 0.32's
``NgramProposer.propose`` skips a request whose context has reached ``max_model_len``; here it
skips one whose context has reached 48 tokens, as if that were the model's length. A request
drafts until its context is 48 tokens long and never after; every draft it makes is the
lookup's.
"""

BOUND = 48


def propose(original, self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
            *args, **kwargs):
    out = original(self, num_speculative_tokens, sampled_token_ids, num_tokens_no_spec,
                   *args, **kwargs)
    try:
        return [[] if int(num_tokens_no_spec[i]) >= BOUND else d for i, d in enumerate(out)]
    except (TypeError, IndexError):  # noqa: BLE001 - leave the step as it was
        return out
