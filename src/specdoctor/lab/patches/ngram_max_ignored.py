"""The n-gram proposer that ignores prompt_lookup_max (vLLM PR #15348, reverted).

Until PR #15348 ("[V1][Spec Decode] Respect prompt_lookup_max"), V1's n-gram proposer was
handed only ``prompt_lookup_min``: "V1's N-gram spec decoding ignores prompt_lookup_max and
only uses prompt_lookup_min". It took the last ``prompt_lookup_min`` tokens of the context,
found their first earlier occurrence and proposed the tokens after it, where the configured
lookup takes the longest suffix of up to ``prompt_lookup_max`` tokens that recurs (a longer
match says more about what comes next).

vLLM 0.32's ``NgramProposer.batch_propose`` passes ``self.min_n`` and ``self.max_n`` to its
matcher, which finds the longest recurring suffix of length in [min_n, max_n], earliest
occurrence first. This wrapper runs the original with ``max_n`` set to ``min_n`` (restored
afterwards): the matcher then looks only for the last ``min_n`` tokens and takes their first
occurrence, as before the fix. Whether a proposal is made at all is unchanged (any suffix that
recurs with at least ``min_n`` tokens recurs with exactly ``min_n``); which one is made is not.

``batch_propose_min`` is the other direction: the original with ``min_n`` set to ``max_n``, a
proposer handed only ``prompt_lookup_max``, which then proposes only where a suffix of the
maximum length recurs.
"""


def _with(name, value, original, self, *args, **kwargs):
    """The original with ``self.<name>`` set to ``value`` for the call, restored after."""
    configured = getattr(self, name)
    setattr(self, name, value)
    try:
        return original(self, *args, **kwargs)
    finally:
        setattr(self, name, configured)


def batch_propose(original, self, *args, **kwargs):
    return _with("max_n", self.min_n, original, self, *args, **kwargs)


def batch_propose_min(original, self, *args, **kwargs):
    return _with("min_n", self.max_n, original, self, *args, **kwargs)
