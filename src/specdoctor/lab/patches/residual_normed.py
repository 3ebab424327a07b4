"""The EAGLE head's first layer normed on the residual path where its checkpoint has no norm
(vLLM PR #11672 reversed).

vLLM's first EAGLE wrapped a full Llama decoder layer, so the EAGLE layer ran the
``input_layernorm`` that the reference EAGLE removes (and a final norm); PR #11672 took the
extra norms out (Llama-2-7b-chat + EAGLE, greedy acceptance 0.308 with them, 0.619 without).

vLLM 0.32's EAGLE3 layer norms the hidden state it is fed (``hidden_norm``) for the attention
input and keeps the un-normed state as the residual (``_norm_after_residual``), unless the
config says ``norm_before_residual``. This replacement norms the state before it becomes the
residual whatever the config says: the stream the layer adds its attention and MLP outputs to
is the normed state, a norm the trained head never had there. Nothing raises.

Loaded by the probe runtime as a ``replace``: ``norm_after_residual(original, self,
hidden_states)``.
"""


def norm_after_residual(original, self, hidden_states):
    hidden_states = self.hidden_norm(hidden_states)
    return hidden_states, hidden_states
