"""The rejection test's uniform draw fixed at 0 (vllm-ascend issue #13730; PR #13470).

A sampled request accepts draft x when u < p(x)/q(x), u uniform in [0, 1) (q(x) = 1 for an
argmax draft): the lossless rule, accepted with probability min(1, p(x)/q(x)). vllm-ascend's
v2 speculator ported vLLM's probabilistic rejection kernel to NPU Triton, which lacks the
random call it used, and put ``u = 0.0`` in its place ("always accept the draft token"):
log(u) = -inf, so every draft passed the test and the rejection sampler became a no-op for
every non-greedy request. PR #13470 reported the acceptance rate as 1.0 before its fix, for
DFlash with probabilistic drafts; issue #13730 reported the same kernel for every drafter.

vLLM 0.32 draws u for the whole batch in ``rejection_sampler.generate_uniform_probs``; this
replacement returns zeros of the same shape, so the random kernel's test
``target_prob / draft_prob >= u`` holds for every draft. Greedy requests are unaffected (an
all-greedy batch never draws u, and a greedy request's drafts are judged by argmax).
"""


def uniform_probs(original, num_tokens, *args, **kwargs):
    return original(num_tokens, *args, **kwargs).zero_()
