"""Prefix-cache hits that restore the target's KV but not the draft's (SGLang #16964/#17338).

SGLang kept the draft model's KV cache outside its hierarchical prefix cache: "when the
original draft model KV cache is evicted, but the target model hits HiCache, the draft model
ends up drafting based on a random KV cache", and the acceptance length of a repeated request
dropped (issue #16964, PR #17338); on radix-cache hits the draft attended KV that was never
written for those positions (issue #19796; PR #19897 zero-fills it). The more traffic shares
prefixes, the more requests hit, so acceptance decays with the server's uptime and a restart
(an empty cache) restores it.

vLLM 0.32 keeps a ``draft_model`` drafter's KV in the same blocks as the target's, so a hit
restores both. This wrapper of ``GPUModelRunner._update_states`` zeroes the draft layers' KV
(layers named ``draft_model.``) in the blocks a newly scheduled request found in the prefix
cache, before the step runs: the target reads its cached prefix as usual, the draft reads
nothing there.
"""

import torch

PREFIX = "draft_model."


def hit_blocks(num_computed_tokens, block_ids, block_size):
    """The block ids a request found cached (its first ``num_computed // block_size``)."""
    return list(block_ids)[: max(0, int(num_computed_tokens) // int(block_size))]


def update_states(original, self, scheduler_output, *args, **kwargs):
    try:
        ctx = self.compilation_config.static_forward_context
        caches = []
        for name, layer in ctx.items():
            kv = getattr(layer, "kv_cache", None)
            if name.startswith(PREFIX) and kv is not None:
                caches.append(kv[0] if isinstance(kv, (list, tuple)) else kv)
        if caches:
            size = self.cache_config.block_size
            for req in scheduler_output.scheduled_new_reqs:
                ids = hit_blocks(req.num_computed_tokens, req.block_ids[0], size)
                if ids:
                    index = torch.tensor(ids, dtype=torch.long)
                    for kv in caches:
                        kv[index] = 0
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return original(self, scheduler_output, *args, **kwargs)
