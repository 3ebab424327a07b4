"""Handlers of the draft-attention-taps pack: learn the draft's attention layers from the
proposer, then tap the draft's CPU attention after it ran.

``proposer_loaded`` runs after ``SpecDecodeBaseProposer.load_model`` (vllm 0.32:
vllm/v1/spec_decode/llm_base_proposer.py), the one place every model-based drafter (draft_model,
EAGLE/EAGLE3, DFlash, MTP) loads its model. There vLLM itself finds the draft's attention layers
(those the draft model added to the forward context, with a KV cache) and keeps them in
``proposer._draft_attn_layer_names``; the handler keeps the same set, and logs it once
({"draft_layers": [...], "proposer": CLASS}). Where the draft model resolves causality per layer
(DFlash: ``get_draft_attn_causal``, aligned with ``get_draft_kv_cache_layer_names``), it keeps
that too, and each tap records it as the layer's own mask (``layer_causal``) beside the causal
flag the kernel was given.

``tap_draft`` runs inside the engine process on every attention call, so it returns at once
unless taps are on (SPECDOCTOR_TAPS) and the layer is the draft's: one of the proposer's layer
names, or, when SPECDOCTOR_TAPS_PREFIX is set, a name starting with that prefix (to tap another
set of layers, e.g. "model.layers." for the target's). It logs one row the first time it taps a
layer, so the server's log says the tap is live, and one row ({"live": NAME, "draft_layers":
[...]}) the first time it sees any other layer, so a log without taps can still tell "the pack
ran but no layer was the draft's" from "the pack never ran".
"""

import os

_draft = set()
_layer_causal = {}
_seen = set()
_seen_other = []


def proposer_loaded(call):
    names = getattr(call.self, "_draft_attn_layer_names", None)
    if names is None:
        return [{"error": f"{type(call.self).__name__}.load_model left no _draft_attn_layer_names: "
                          "this vLLM does not say which attention layers are the draft's"}]
    new = set(str(n) for n in names) - _draft
    _draft.update(new)
    model = getattr(call.self, "model", None)
    if hasattr(model, "get_draft_attn_causal") and hasattr(model, "get_draft_kv_cache_layer_names"):
        _layer_causal.update(zip(model.get_draft_kv_cache_layer_names(),
                                 (bool(c) for c in model.get_draft_attn_causal())))
    if not new:
        return None
    return [{"draft_layers": sorted(new), "proposer": type(call.self).__name__,
             "layer_causal": {n: _layer_causal[n] for n in sorted(new) if n in _layer_causal}}]


def is_draft(name):
    prefix = os.environ.get("SPECDOCTOR_TAPS_PREFIX")
    return name.startswith(prefix) if prefix else name in _draft


def tap_draft(call):
    if not os.environ.get("SPECDOCTOR_TAPS"):
        return None
    layer = call.param("layer")
    name = str(getattr(layer, "layer_name", ""))
    if not is_draft(name):
        if not _seen_other:
            _seen_other.append(name)
            return [{"live": name, "draft_layers": sorted(_draft)}]
        return None
    metadata = call.param("attn_metadata")
    if metadata is None:
        return None
    from specdoctor.packs.tap_vllm_cpu import tap_forward

    meta = {"layer_causal": _layer_causal[name]} if name in _layer_causal else None
    tap_forward(call.self, layer, call.param("query"), call.param("kv_cache"), metadata,
                call.param("output"), name="attn", layer_name=name, meta=meta)
    if name not in _seen:
        _seen.add(name)
        return [{"tapped": name, "dir": os.environ["SPECDOCTOR_TAPS"]}]
    return None
