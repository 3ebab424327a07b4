"""Rejection sampling against the target's unprocessed distribution (vLLM PR #10198 reversed).

Before PR #10198 ("apply sampling parameters to target probabilities for consistency in
rejection sampling"), vLLM's rejection sampler compared each draft token with the target's
probabilities before the request's temperature and top-p were applied, while the bonus and
the non-speculative path sampled with them: the accept/reject test ran on another
distribution than the one the request asked for.

vLLM 0.32 applies them in ``rejection_sampler.apply_sampling_constraints`` (temperature
division, then top-k/top-p) before ``rejection_sample``. This replacement returns the logits
as they came, so draft tokens are accepted and recovered tokens drawn under temperature 1 with
no top-k/top-p. Greedy requests are unaffected (the original returns them unchanged too).
"""


def constraints(original, logits, cu_num_draft_tokens, sampling_metadata):
    return logits
