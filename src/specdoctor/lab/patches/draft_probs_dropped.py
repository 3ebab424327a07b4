"""Sampled drafts verified as argmax drafts (vLLM issue #40149, PR #40269; PR #41044).

With ``draft_sample_method = "probabilistic"`` the proposer draws each draft token from the
drafter's (temperature-scaled) distribution q. The rejection sampler is lossless for such a
draft only when it knows q: it accepts x with probability min(1, p(x)/q(x)) and recovers from
max(0, p - q). Before PR #40269, ``GPUModelRunner._sample`` passed ``draft_probs=None`` to the
rejection sampler, whose fallback for a proposal without probabilities treats it as one-hot
(q(x) = 1, the argmax contract): a sampled draft is then accepted with probability p(x) alone
and the recovery subtracts only the drafted token. Issue #40149 reported it for draft_model;
PR #41044 found the same for MTP/EAGLE proposals ("treating MTP draft tokens as
probability-less proposals") and reported a large acceptance gain from fixing it.

vLLM 0.32 has the fix: the proposer keeps its draft probabilities (``take_last_draft_probs``)
and ``GPUModelRunner._get_spec_decode_draft_probs`` realigns them by request for the rejection
sampler. This replacement returns ``None`` there, as ``_sample`` did before the fix; the
proposer still samples its drafts. Greedy requests are unaffected (an all-greedy batch drafts
by argmax and keeps no probabilities).
"""


def draft_probs(original, self, *args, **kwargs):
    return None
