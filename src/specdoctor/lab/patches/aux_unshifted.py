"""DFlash's hidden-state taps one layer early (vLLM PRs #40727 and #42704, reversed).

A DFlash drafter's ``dflash_config.target_layer_ids`` name the target layers whose *output*
it was trained on. vLLM's aux-state taps are indexed by the residual stream *entering* a layer
(0 = embeddings), so vLLM adds one to each id; the fix in #40727 (#42704 was closed as its
duplicate) is that shift, and onnxruntime-genai PR #2538 is the same bug in another engine:
"matching the IDs directly supplied the previous layer's output and could materially reduce
DFlash acceptance".

This wrapper of ``GPUModelRunner._get_eagle3_aux_layers_from_config`` takes the shift back
out for a DFlash drafter (one whose config has ``dflash_config`` and no explicit EAGLE aux
ids), so the engine taps each named layer's input. The served config is right; shapes match;
nothing raises.
"""


def aux_layers(original, self, *args, **kwargs):
    out = original(self, *args, **kwargs)
    try:
        hf = self.speculative_config.draft_model_config.hf_config
        explicit = getattr(hf, "eagle_aux_hidden_state_layer_ids", None) or (
            (getattr(hf, "eagle_config", None) or {}).get("eagle_aux_hidden_state_layer_ids"))
        if out and isinstance(getattr(hf, "dflash_config", None), dict) and not explicit:
            return tuple(i - 1 for i in out)
    except Exception:  # noqa: BLE001 - leave the ids as they were
        pass
    return out
