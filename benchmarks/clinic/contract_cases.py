"""Clinic cases on the drafter's contract: fields vLLM reads whose value is wrong while every
shape still fits (target layer ids inside the target's range, a DFlash mask token id).

Each reproduces a mechanism reported upstream (``cite``), on the lab's trained EAGLE3 and DFlash
drafters, by an edit of the files a server reads; each was committed with its answer before its
first diagnosis (``table.py`` keeps that first answer beside the latest). The two healthy
controls on the deep target (origin ``dev``: no upstream report) are the twins: the right layers
on the same served target must stay a healthy answer.

In-range layer ids need a target deeper than the lab's two layers: the *deep* target is the
trained target with five layers appended whose attention and MLP output projections are zero,
so each adds nothing to the residual stream. It computes the same function (same greedy text),
layers 2 to 7 of its stream all equal the output of layer 1, and the drafters trained on the
two-layer target fit it exactly when they read the layers they were trained on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from patients import DFLASH_FIX, Case, edit_tensors, lab_drafter, set_field

DEEP_LAYERS = 7
# A token of the lab tokenizer's ordinary vocabulary (it decodes to "ext"): what a mask id
# written for another tokenizer names in this one.
ORDINARY_TOKEN = 500
EOS = 1   # the lab tokenizer's <|eos|>


def deepen(d: Path, layers: int = DEEP_LAYERS) -> None:
    """The target with layers appended that add nothing to its residual stream: copies of its
    last layer with the attention and MLP output projections set to zero."""
    import torch

    cfg = json.loads((d / "config.json").read_text())
    n = cfg["num_hidden_layers"]
    last = f"model.layers.{n - 1}."

    def edit(t: dict[str, Any]) -> None:
        for i in range(n, layers):
            for name, w in list(t.items()):
                if name.startswith(last):
                    new = f"model.layers.{i}." + name[len(last):]
                    zero = name.endswith(("o_proj.weight", "down_proj.weight"))
                    t[new] = torch.zeros_like(w) if zero else w.clone()

    edit_tensors(d, edit)
    cfg["num_hidden_layers"] = layers
    if cfg.get("layer_types"):
        cfg["layer_types"] = [cfg["layer_types"][0]] * layers
    if "max_window_layers" in cfg:
        cfg["max_window_layers"] = layers
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def aux_ids_dropped(d: Path) -> None:
    """The head's config without eagle_aux_hidden_state_layer_ids (top level and eagle_config)."""
    cfg = json.loads((d / "config.json").read_text())
    cfg.pop("eagle_aux_hidden_state_layer_ids", None)
    (cfg.get("eagle_config") or {}).pop("eagle_aux_hidden_state_layer_ids", None)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def aux_ids(ids: list[int]) -> Any:
    """The head's aux layer ids set to ``ids`` in both places its config names them."""
    def edit(d: Path) -> None:
        set_field("eagle_aux_hidden_state_layer_ids", ids)(d)
        set_field("eagle_config.eagle_aux_hidden_state_layer_ids", ids)(d)
    return edit


CONTRACT_CASES = [
    Case("healthy-eagle3-deep", None, lab_drafter("eagle3", edit_target=deepen),
         "trained EAGLE3 on a 7-layer target whose last 5 layers add nothing, reading the "
         "layers it was trained on", category="healthy"),
    Case("healthy-dflash-deep", None,
         lab_drafter("dflash", edit_target=deepen, packs=(DFLASH_FIX,)),
         "trained DFlash on a 7-layer target whose last 5 layers add nothing, reading the "
         "layers it was trained on; the engine's DFlash k_norm defect fixed",
         category="healthy"),
    Case("up-eagle3-aux-ids-defaulted", "draft-config-mismatch",
         lab_drafter("eagle3", edit_target=deepen, edit_draft=aux_ids_dropped),
         "trained EAGLE3 (aux layers 0, 1, 2) on the 7-layer target, its config naming no aux "
         "layers, so vLLM taps its default (2, 3, 4) (served files)",
         origin="upstream", twin="healthy-eagle3-deep",
         cite="vllm-project/vllm PR #50170; lightseekorg/tokenspeed PR #526",
         upstream="an EAGLE3 head whose config omits eagle_aux_hidden_state_layer_ids is fed "
                  "the target's default layers (2, L // 2, L - 3), not the ones it was trained "
                  "on: acceptance collapsed (1.2% vs 58.9% on Llama-3.3-70B) with no error and "
                  "no log line",
         how="the head trained on layers 0, 1, 2 of the lab target, served beside the deepened "
             "target (same function, 7 layers) with the ids removed from its config; the "
             "default names layers 2, 3, 4, all in range"),
    Case("up-eagle3-aux-ids-shifted", "draft-config-mismatch",
         lab_drafter("eagle3", edit_target=deepen, edit_draft=aux_ids([1, 2, 3])),
         "trained EAGLE3 (aux layers 0, 1, 2) on the 7-layer target with its ids written one "
         "higher, 1, 2, 3 (served files)",
         origin="upstream", twin="healthy-eagle3-deep",
         cite="sgl-project/sglang PR #25454",
         upstream="EAGLE3 drafts ship their aux layer ids in two conventions (output of layer "
                  "X, or input of layer X); ids read in the other convention tap layers one "
                  "off, all inside the target: lower accept length, no error",
         how="the head's eagle_aux_hidden_state_layer_ids (top level and eagle_config) 0, 1, 2 "
             "written as 1, 2, 3, beside the deepened target"),
    Case("up-dflash-layer-ids-shifted", "draft-config-mismatch",
         lab_drafter("dflash", edit_target=deepen,
                     edit_draft=set_field("dflash_config.target_layer_ids", [1, 2])),
         "trained DFlash (target_layer_ids 0, 1) on the 7-layer target with its ids written one "
         "higher, 1, 2 (served files)",
         origin="upstream", twin="healthy-dflash-deep",
         cite="vllm-project/vllm PR #40727; microsoft/onnxruntime-genai PR #2538",
         upstream="DFlash's target_layer_ids count layer outputs where EAGLE3's aux ids count "
                  "layer inputs; ids taken in the other convention tap the neighbouring layers "
                  "and lower acceptance",
         how="dflash_config.target_layer_ids 0, 1 written as 1, 2 (every id inside the "
             "deepened target's 7 layers)"),
    Case("up-dflash-mask-token-ordinary", "draft-config-mismatch",
         lab_drafter("dflash", edit_draft=set_field("dflash_config.mask_token_id",
                                                    ORDINARY_TOKEN)),
         "trained DFlash (mask token: the tokenizer's pad) served with a mask_token_id that "
         "names an ordinary token of this tokenizer (served files)",
         origin="upstream", twin="healthy-dflash",
         cite="NVIDIA-NeMo/Automodel PR #2461; z-lab/dflash issue #73",
         upstream="DFlash fills each block's masked slots with mask_token_id, whose embedding "
                  "row is the learned 'predict here' signal; it must be the id the drafter was "
                  "trained with and a reserved or special token of the target's tokenizer, not "
                  "a token of ordinary text, else acceptance degrades quietly",
         how="dflash_config.mask_token_id 2 (<|pad|>) set to 500, an ordinary vocabulary "
             "token of the lab tokenizer (a mask id written for another tokenizer)"),
    Case("up-dflash-mask-token-eos", "draft-config-mismatch",
         lab_drafter("dflash", edit_draft=set_field("dflash_config.mask_token_id", EOS)),
         "trained DFlash (mask token: the tokenizer's pad) served with mask_token_id naming the "
         "end-of-sequence token (served files)",
         origin="upstream", twin="healthy-dflash",
         cite="NVIDIA-NeMo/Automodel PR #2461",
         upstream="a DFlash mask id resolved from pad_token_id, aliased to eos_token_id, fills "
                  "the masked slots with a heavily used, meaningful embedding: training and "
                  "serving do not error and acceptance quietly degrades",
         how="dflash_config.mask_token_id 2 (<|pad|>) set to 1 (<|eos|>)"),
]
