"""How vLLM 0.32 reads a drafter's config: which target states it gets, and how it attends.

Pure functions on config dicts, each the oracle's statement of one vLLM rule, pinned by
tests/oracle/heads/test_conventions.py against vLLM's own functions (so a rule that moves
upstream fails a test instead of shifting every prediction):

- **Aux hidden states** are numbered by layer *input*: 0 is the embeddings, i >= 1 the residual
  stream after layer i - 1 (``_maybe_add_hidden_state(aux, idx + 1, ...)`` in llama.py), L the
  last layer's output before the final norm. The ids the target collects come from the draft
  config: ``eagle_aux_hidden_state_layer_ids`` at the top level; else DFlash's
  ``dflash_config.target_layer_ids`` plus one (DFlash counts layer *outputs*), overridden by an
  ``eagle_config`` dict's ``eagle_aux_hidden_state_layer_ids`` when that dict is not empty; else the
  target model's default ``(2, L // 2, L - 3)`` (``GPUModelRunner._get_eagle3_aux_layers_from_
  config`` and ``SupportsEagle3.get_eagle3_default_aux_hidden_state_layers``). The target
  appends them in layer order, so the ids act as a sorted set.
- **DFlash attention** per layer (``qwen3_dflash._resolve_layer_attention``): ``is_causal``,
  else ``dflash_config.causal``, else causal exactly where ``layer_types`` says ``sliding_attention``; a layer slides when
  ``use_swa`` is set (on every layer when ``layer_types`` has no sliding entry) or when its
  ``layer_types`` entry is ``sliding_attention``; the window is ``swa_window_size`` or the
  top-level ``sliding_window``.
- **MTP target state**: MiMo's target returns ``hidden + residual`` before its final norm;
  DeepSeek's returns the normed state (the MTP layer's ``hnorm`` sees either).
"""

from __future__ import annotations

from typing import Any

VLLM_VERSION = "0.32"


def default_aux_ids(target_layers: int) -> tuple[int, ...]:
    """The target model's default EAGLE3 aux ids when the draft config names none."""
    return (2, target_layers // 2, target_layers - 3)


def aux_ids_from_config(draft_cfg: dict[str, Any]) -> tuple[int, ...] | None:
    """The aux ids a draft config names (None: it names none, the target's default applies)."""
    ids = draft_cfg.get("eagle_aux_hidden_state_layer_ids")
    if not ids:
        dflash = draft_cfg.get("dflash_config")
        eagle = draft_cfg.get("eagle_config")
        if dflash and isinstance(dflash, dict):
            ids = [i + 1 for i in (dflash.get("target_layer_ids") or [])]
        if eagle and isinstance(eagle, dict):
            ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    if ids and isinstance(ids, (list, tuple)):
        return tuple(int(i) for i in ids)
    return None


def aux_ids(draft_cfg: dict[str, Any], target_layers: int) -> tuple[int, ...]:
    """The aux ids the target collects, in the order it appends them (layer order, each once)."""
    ids = aux_ids_from_config(draft_cfg) or default_aux_ids(target_layers)
    return tuple(sorted(set(ids)))


def dflash_layer_attention(cfg: dict[str, Any], layer: int) -> tuple[int | None, bool]:
    """(sliding window or None, causal) of DFlash draft layer ``layer``."""
    dflash = cfg.get("dflash_config") or {}
    use_swa = bool(dflash.get("use_swa", False))
    layer_types = cfg.get("layer_types")
    any_sliding = bool(layer_types) and "sliding_attention" in layer_types
    if layer_types is None or (use_swa and not any_sliding):
        sliding = use_swa
    else:
        sliding = layer_types[layer] == "sliding_attention"
    window = None
    if sliding:
        window = dflash.get("swa_window_size", cfg.get("sliding_window"))
        if window is None:
            from specdoctor.errors import InputError

            raise InputError(f"DFlash layer {layer} slides but the config names no window",
                             "set dflash_config.swa_window_size or the top-level "
                             "sliding_window (as vLLM " + VLLM_VERSION + " requires)")
    is_causal = cfg.get("is_causal")
    if is_causal is not None:
        causal = bool(is_causal)
    elif dflash.get("causal") is not None:
        causal = bool(dflash["causal"])
    else:  # the layer types alone decide, even where use_swa forces a window
        causal = bool(layer_types) and layer_types[layer] == "sliding_attention"
    return (int(window) if window is not None else None), causal
