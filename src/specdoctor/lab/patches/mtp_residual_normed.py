"""The MTP layer's residual stream normed where its checkpoint has no norm (the MTP sibling of
vLLM PR #11672 reversed, beside ROCm/ATOM PR #1764's norm missing on the MTP recursion).

MiMo's MTP layer projects [normed hidden state, normed token embedding] with ``input_proj``
and runs one decoder block on it, the projection as the block's residual stream. This
replacement of ``MiMoMultiTokenPredictorLayer.forward`` is vLLM 0.32's forward with one norm
added: the projection is normed (with the block's ``input_layernorm``) before it enters the
block, so the residual the block adds to is the normed projection. Nothing raises.

Loaded by the probe runtime as a ``replace``: ``forward(original, self, inputs_embeds,
positions, previous_hidden_states, spec_step_index=0)``.
"""


def forward(original, self, inputs_embeds, positions, previous_hidden_states,
            spec_step_index=0):
    import torch

    inputs_embeds = torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)
    inputs_embeds = self.token_layernorm(inputs_embeds)
    previous_hidden_states = self.hidden_layernorm(previous_hidden_states)
    hidden_states = self.input_proj(torch.cat([previous_hidden_states, inputs_embeds], dim=-1))
    hidden_states = self.mtp_block.input_layernorm(hidden_states)
    hidden_states, residual = self.mtp_block(positions=positions, hidden_states=hidden_states,
                                             residual=None)
    return self.final_layernorm(residual + hidden_states)
