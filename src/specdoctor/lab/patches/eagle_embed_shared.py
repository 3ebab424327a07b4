"""An EAGLE head's own input embedding overwritten by the target's (vLLM PR #28549, reverted).

Until PR #28549 ("Add support for Eagle with separate lm-head and embed_tokens layers", first
posted as #27732 and #27737), vLLM's EAGLE proposer replaced the drafter's ``embed_tokens``
with the target's whenever pipeline parallelism was off and the two tables had the same shape,
without asking whether the checkpoint shipped an embedding of its own. Heads trained with
their own embedding (the PR's example, RedHatAI/gpt-oss-20b-speculator.eagle3: acceptance at
positions 0..2 of 0.23, 0.07, 0.02 before the fix, 0.70, 0.48, 0.31 after; vllm-ascend PR #5575
ports the fix) then read the target's token vectors in place of the ones they were trained on.

vLLM 0.32 decides in ``SpecDecodeBaseProposer._maybe_share_embeddings``: it shares only when
the head has no embedding in its checkpoint (``has_own_embed_tokens``) or an identical one.
This wrapper restores the old rule for EAGLE heads: same shape, single pipeline stage, share;
anything else goes to the original.
"""


def share(original, self, target_language_model, *args, **kwargs):
    try:
        from vllm.distributed.parallel_state import get_pp_group

        inner = getattr(target_language_model, "model", None)
        target = getattr(inner, "embed_tokens", None) or getattr(inner, "embedding", None)
        draft = getattr(getattr(self.model, "model", None), "embed_tokens", None)
        if (get_pp_group().world_size == 1 and hasattr(self.model, "has_own_embed_tokens")
                and target is not None and draft is not None
                and tuple(target.weight.shape) == tuple(draft.weight.shape)):
            del self.model.model.embed_tokens
            self.model.model.embed_tokens = target
            return None
    except Exception:  # noqa: BLE001 - leave the decision to vLLM
        pass
    return original(self, target_language_model, *args, **kwargs)
