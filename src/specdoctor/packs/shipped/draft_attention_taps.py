"""Handler of the draft-attention-taps pack: tap the draft's CPU attention after it ran.

Runs inside the engine process on every attention call, so it returns at once unless taps are
on (SPECDOCTOR_TAPS) and the layer is the draft's (its name starts with SPECDOCTOR_TAPS_PREFIX,
default "draft_model.", the prefix vLLM gives a draft_model draft). It logs one row the first
time it taps a layer, so the server's log says the tap is live, and one row ({"live": NAME})
the first time it sees any other layer, so a log without taps can still tell "the pack ran but
no layer had the prefix" from "the pack never ran".
"""

import os

DEFAULT_PREFIX = "draft_model."
_seen = set()
_seen_other = []


def tap_draft(call):
    if not os.environ.get("SPECDOCTOR_TAPS"):
        return None
    layer = call.param("layer")
    name = str(getattr(layer, "layer_name", ""))
    if not name.startswith(os.environ.get("SPECDOCTOR_TAPS_PREFIX", DEFAULT_PREFIX)):
        if not _seen_other:
            _seen_other.append(name)
            return [{"live": name}]
        return None
    metadata = call.param("attn_metadata")
    if metadata is None:
        return None
    from specdoctor.packs.tap_vllm_cpu import tap_forward

    tap_forward(call.self, layer, call.param("query"), call.param("kv_cache"), metadata,
                call.param("output"), name="attn", layer_name=name)
    if name not in _seen:
        _seen.add(name)
        return [{"tapped": name, "dir": os.environ["SPECDOCTOR_TAPS"]}]
    return None
