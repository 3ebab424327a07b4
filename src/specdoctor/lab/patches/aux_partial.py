"""The auxiliary hidden states an EAGLE3 drafter reads captured as a partial sum (SGLang PR
#28343; TensorRT-LLM PR #6199 for the same class).

With all-reduce fusion, a tensor-parallel layer's MLP all-reduce is deferred into the next
layer's fused all-reduce + RMSNorm kernel; SGLang's EAGLE3 capture read ``hidden_states +
residual`` before that kernel ran, so each rank captured the residual plus its own share of the
layer's MLP output instead of the reduced sum, "silently degrading draft quality" (Kimi K2.5,
TP > 1). The target's own output stayed right.

vLLM 0.32 captures ``hidden_states + residual`` at each tapped layer in
``EagleModelMixin._maybe_add_hidden_state``. This replacement captures ``residual + 0.5 *
hidden_states``: one rank's half of the last layer output at tensor parallel 2, emulated on
one CPU rank. The target's forward is untouched (the capture is a copy).

``add_quarter``: one rank's quarter, at tensor parallel 4.

Loaded by the probe runtime as a ``replace``: ``add_hidden_state(original, self,
aux_hidden_states, layer_idx, hidden_states, residual)``.
"""


def _partial(self, aux_hidden_states, layer_idx, hidden_states, residual, share):
    if layer_idx in self.aux_hidden_state_layers:
        value = residual + share * hidden_states if residual is not None else hidden_states
        aux_hidden_states.append(value)
    return aux_hidden_states


def add_hidden_state(original, self, aux_hidden_states, layer_idx, hidden_states, residual):
    return _partial(self, aux_hidden_states, layer_idx, hidden_states, residual, 0.5)


def add_quarter(original, self, aux_hidden_states, layer_idx, hidden_states, residual):
    return _partial(self, aux_hidden_states, layer_idx, hidden_states, residual, 0.25)
