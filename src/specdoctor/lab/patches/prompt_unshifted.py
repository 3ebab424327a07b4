"""The drafter's prompt entries unshifted: the first token kept, each token paired with the
previous position's hidden state (vLLM issue #14647, V0's EAGLE / DeepSeek MTP).

The reference EAGLE drops the prompt's first token: the draft entry at position p is the token
t_{p+1} with the target's hidden state h_p. vLLM V0 kept t_0, paired with a zeroed hidden
state, and so paired t_p with h_{p-1} at position p: the draft's KV held one junk entry at the
start and every prompt entry one position later than in training ("EAGLE / DeepSeek MTP
handles first input token incorrectly - 25% acceptance rate drop").

vLLM 0.32's ``SpecDecodeBaseProposer.set_inputs_first_pass`` rotates the ids by one for the
EAGLE pathway. This wrapper runs it, then, for each request whose first pass is a prefill
(more tokens than a decode step's k + 1), writes back every prompt slot but the request's
sample slot as V0 did: token t_p, hidden state h_{p-1}, zeros at the first slot; positions are
left as they are. The sample slot (the token just sampled with the last prompt state) and
every decode step are unchanged. Drafters that need extra input slots take the other branch and
are left as they are.
"""


def first_pass(original, self, target_token_ids, next_token_ids, target_positions,
               target_hidden_states, token_indices_to_sample, cad, *args, **kwargs):
    out = original(self, target_token_ids, next_token_ids, target_positions,
                   target_hidden_states, token_indices_to_sample, cad, *args, **kwargs)
    try:
        if not self.needs_extra_input_slots:
            starts = cad.query_start_loc.tolist()
            samples = out[1].tolist()
            k = int(self.num_speculative_tokens)
            for i in range(len(starts) - 1):
                s, e = int(starts[i]), int(starts[i + 1])
                last = int(samples[i])
                if e - s <= k + 1 or not s < last < e:
                    continue
                self.input_ids[s:last] = target_token_ids[s:last].to(self.input_ids.dtype)
                self.hidden_states[s + 1:last] = target_hidden_states[s:last - 1]
                self.hidden_states[s] = 0
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out
