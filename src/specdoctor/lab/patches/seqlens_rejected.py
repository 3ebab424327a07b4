"""Draft decode steps that attend over rejected positions (vLLM issue #26191, reintroduced).

With the padded drafter batch (vLLM's default since PR #24539) the drafter's first pass runs
over every token the target verified, rejected drafts included, and samples from the last
accepted one. The draft decode steps after it must then attend over the accepted sequence only:
its length is the verified length minus the rejected count. Before PR #29845 ("Simplified
alternative padded-speculation acceptance rate fix", after PR #26498) vLLM left
``common_attn_metadata.seq_lens`` at the verified length, so every later draft step attended to
the first pass's KV entries of the rejected tokens as if they came before it: acceptance length
about 5% lower at k=10 (EAGLE3, Llama-3.1-8B: 3.25 before, 3.40 after). vllm-ascend PR #14883
reports the same omission in its model runner V1 (device-side sequence lengths 2 or 3 too long
in consecutive draft steps).

vLLM 0.32's ``SpecDecodeBaseProposer.propose`` subtracts ``num_rejected_tokens_gpu`` from the
sequence lengths before its draft decode loop; on the default EAGLE/MTP path (no extra input
slots) that count is read nowhere else. This wrapper hands the original ``None`` for it on that
path, so the subtraction is skipped, as before the fix. Proposers that insert extra slots (the
draft-model and parallel-drafting paths use the count to place their inputs) are left as they are.
"""


def propose(original, self, *args, **kwargs):
    if not getattr(self, "needs_extra_input_slots", True):
        if "num_rejected_tokens_gpu" in kwargs:
            kwargs["num_rejected_tokens_gpu"] = None
        elif len(args) >= 10:
            args = args[:9] + (None,) + args[10:]
    return original(self, *args, **kwargs)
