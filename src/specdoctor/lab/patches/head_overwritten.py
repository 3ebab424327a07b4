"""A drafter's own reduced-vocabulary lm_head overwritten by the target's (vllm-ascend issue
#11374, a regression of PR #9795 undone by PR #9946).

DFlash speculators may ship a head of their own over a reduced draft vocabulary
(``draft_vocab_size`` rows, trained) with a ``d2t`` map to the target's ids. vllm-ascend's
``_maybe_share_lm_head`` replaced the draft's head with the target's whenever the method was
eagle or dflash, so the draft scored its slots with other rows and the d2t scatter gave them
other tokens' ids: acceptance 25% -> 1.7% (Qwen3-8B + a DFlash speculator, k=7).

vLLM 0.32 keeps a head the checkpoint ships when it differs from the target's. This wrapper
runs it, then, for a drafter that has its own head and a d2t map, writes the target head's
first ``draft_vocab_size`` rows over the drafter's (the target's head in the drafter's place,
cut to the drafter's slots so that the shapes fit). Nothing raises.

Loaded by the probe runtime as a ``replace``: ``share_lm_head(original, self,
target_language_model)``.
"""


def share_lm_head(original, self, target_language_model, *args, **kwargs):
    out = original(self, target_language_model, *args, **kwargs)
    try:
        import torch

        model = self.model
        own = model.lm_head is not getattr(target_language_model, "lm_head", None)
        if own and getattr(model, "draft_id_to_target_id", None) is not None:
            w = model.lm_head.weight
            with torch.no_grad():
                w.copy_(target_language_model.lm_head.weight[: w.shape[0]].to(w.dtype))
    except Exception:  # noqa: BLE001 - leave the drafter as it was
        pass
    return out
