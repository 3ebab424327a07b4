"""MTP recursion fed the target's stale hidden state (vLLM PR #36531, reintroduced).

After the first MTP pass, the proposer keeps a hidden state per request to feed the next
(recursive) draft step. vLLM PR #34552 changed one check so that MTP took it from the
proposer's buffer of the *target's* hidden states (``self.hidden_states[token_indices]``)
instead of the MTP layer's own output; PR #36531 ("Fix MTP hidden_states regression") put it
back: every recursive step after the first drafted from the target's state at the last
verified token, not from the state of the token it had just drafted.

vLLM 0.32 reads the state to feed back from the model's second output when
``model_returns_tuple()`` is true. This pack makes MiMo's MTP model return ``(output,
hidden_states it was given)`` and says so: logits still come from the layer's output, and each
recursive step is fed the target's hidden state the first pass read.
"""


def returns_tuple(original, self, *args, **kwargs):
    if getattr(self, "method", None) == "mtp":
        return True
    return original(self, *args, **kwargs)


def forward(original, self, input_ids, positions, hidden_states, *args, **kwargs):
    out = original(self, input_ids, positions, hidden_states, *args, **kwargs)
    return out, hidden_states
