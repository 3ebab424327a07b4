"""The probes' decisions: the live engine's draft (``view.EngineView``) against what the files
and the launch say (pure functions of the view and the two ``config.json`` dicts).

- ``draft-parallel-config``: the parallel layout the draft was built under against the
  target's. A context-parallel size (or its KV interleave) the target shards by and the draft
  does not is Case B's defect seen on the live engine: confirmed. The same layout: excluded.
- ``rope-sync``: the draft's rotary embeddings as built against the rope its config states
  (theta, neox style, scaling, rotary share). A stated setting built otherwise: the engine did
  not apply the drafter's rope, confirmed. A theta the config does not state, built other than
  the target's: a lead (the counterfactual writes the target's theta into the drafter). Built as
  stated: inconclusive, since the positions each step passes are not seen at start-up.
- ``attention-mask``: a draft layer served with another window or causality than its files
  state (DFlash's metadata applies one causality to every layer): a lead, never a verdict.
- ``draft-config-mismatch``: aux layers the engine hands the drafter that its files do not name
  (the model's defaults) or name otherwise: a lead.
"""

from __future__ import annotations

from typing import Any

from specdoctor.verdict.findings import Finding, Lead, Verdict
from specdoctor.experiments.config_audit.models import HIDDEN_FED
from specdoctor.experiments.probes.view import (
    CONTEXT_PARALLEL, INTERLEAVE, BuiltModel, EngineView, Layer,
)
from specdoctor.methods import LOOKUP_METHODS
from specdoctor.served_files import aux_layer_ids, fc_reads, rope_view, stated_masks

PARALLEL = "draft-parallel-config"
ROPE = "rope-sync"
MASK = "attention-mask"
CONFIG = "draft-config-mismatch"
SOURCE = "probes"
REL_TOL = 1e-6


# -- a mask in words --------------------------------------------------------------------------

def _show_mask(window: int | None, causal: bool | None) -> str:
    c = "causal" if causal else "non-causal" if causal is False else "causality unknown"
    return f"{c}, {'window ' + str(window) if window is not None else 'no window'}"


# -- parallel layout --------------------------------------------------------------------------

def parallel_finding(view: EngineView, method: str | None) -> Finding:
    if view.draft is None or view.target is None:
        if method in LOOKUP_METHODS:
            return Finding(PARALLEL, Verdict.EXCLUDED, f"{method} drafts by prompt lookup: no "
                           "draft model is built, so there is no draft parallel config")
        return Finding(PARALLEL, Verdict.INCONCLUSIVE, "the probes saw no draft model being "
                       "built (no second model-built line): the draft's layout was not read")
    t, d = view.target, view.draft
    lost = [(key, t.cp(key), d.cp(key)) for key in CONTEXT_PARALLEL
            if t.cp(key) > 1 and d.cp(key) != t.cp(key)]
    sharded = any(t.cp(key) > 1 for key in CONTEXT_PARALLEL)
    if sharded:
        lost += [(key, t.parallel.get(key), d.parallel.get(key)) for key in INTERLEAVE
                 if t.parallel.get(key) != d.parallel.get(key)]
    layout = _layout(t)
    if lost:
        shown = "; ".join(f"{key}: target {tv}, draft {dv}" for key, tv, dv in lost)
        return Finding(PARALLEL, Verdict.CONFIRMED,
                       f"live engine: the draft was built under another parallel layout than "
                       f"the target whose sharded KV cache it reads ({shown}); its attention "
                       f"treats a cache sharded by the target's layout as if it were not (Case "
                       f"B's defect)")
    return Finding(PARALLEL, Verdict.EXCLUDED,
                   f"live engine: the draft was built under the target's own layout ({layout})"
                   + ("" if sharded else "; nothing is context-parallel"))


def _layout(m: BuiltModel) -> str:
    keys = ("tensor_parallel_size", *CONTEXT_PARALLEL, *INTERLEAVE)
    short = {"tensor_parallel_size": "tp", "decode_context_parallel_size": "dcp",
             "prefill_context_parallel_size": "pcp",
             "dcp_kv_cache_interleave_size": "dcp interleave",
             "cp_kv_cache_interleave_size": "cp interleave"}
    return ", ".join(f"{short[k]} {m.parallel[k]}" for k in keys if k in m.parallel)


# -- rope -------------------------------------------------------------------------------------

def _close(a: float | None, b: Any) -> bool:
    return a is not None and isinstance(b, (int, float)) and \
        abs(a - float(b)) <= REL_TOL * max(abs(float(b)), 1.0)


def rope_contradictions(built: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """Settings the config states that the built rotary embedding does not apply (pure)."""
    stated = rope_view(cfg)
    out = []
    theta = stated.get("rope_theta")
    if theta is not None and not _close(built.get("base"), theta):
        out.append(f"theta {built.get('base')} where the config states {theta}")
    neox = cfg.get("is_neox_style")
    if isinstance(neox, bool) and built.get("is_neox_style") is not None \
            and built["is_neox_style"] != neox:
        out.append(f"neox style {built['is_neox_style']} where the config states {neox}")
    kind = stated.get("rope_type")
    if kind not in (None, "default") and built.get("class") == "RotaryEmbedding":
        out.append(f"no scaling (plain RotaryEmbedding) where the config states rope_type "
                   f"{kind!r}")
    factor = stated.get("factor")
    if isinstance(factor, (int, float)) and isinstance(built.get("scaling_factor"), (int, float)) \
            and not _close(float(built["scaling_factor"]), factor):
        out.append(f"scaling factor {built['scaling_factor']} where the config states {factor}")
    share = stated.get("partial_rotary_factor")
    hs, rd = built.get("head_size"), built.get("rotary_dim")
    if isinstance(share, (int, float)) and isinstance(hs, int) and isinstance(rd, int) \
            and rd != int(hs * share):
        out.append(f"rotary dim {rd} of head {hs} where the config states a share of {share}")
    return out


def rope_finding(view: EngineView, draft_cfg: dict[str, Any], target_cfg: dict[str, Any],
                 method: str | None) -> tuple[Finding, list[Lead]]:
    if view.draft is None:
        return Finding(ROPE, Verdict.INCONCLUSIVE, "no draft model was seen being built"), []
    built = view.draft.distinct_ropes()
    if not built:
        return Finding(ROPE, Verdict.INCONCLUSIVE,
                       "the draft was built without a rotary embedding the probe recognises"), []
    wrong = [f"{b.get('class')}: {c}" for b in built for c in rope_contradictions(b, draft_cfg)]
    if wrong:
        return Finding(ROPE, Verdict.CONFIRMED,
                       "live engine: the draft's rotary embedding is not the one its config "
                       "states (" + "; ".join(wrong) + "): the engine did not apply the "
                       "drafter's rope"), []
    shown = ", ".join(_rope_text(b) for b in built)
    theta_stated = "rope_theta" in rope_view(draft_cfg)
    target_ropes = view.target.distinct_ropes() if view.target is not None else []
    t_base = target_ropes[0].get("base") if target_ropes else None
    same_family = method in HIDDEN_FED or (
        draft_cfg.get("model_type") is not None
        and draft_cfg.get("model_type") == target_cfg.get("model_type"))
    if not theta_stated and same_family and t_base is not None \
            and any(not _close(b.get("base"), t_base) for b in built):
        why = (f"the drafter's config states no rope theta and the engine built it with "
               f"{built[0].get('base')}, the architecture's default, where the target rotates "
               f"with {t_base}")
        return (Finding(ROPE, Verdict.INCONCLUSIVE, f"live engine: {why}: a lead for the "
                        f"counterfactual (rope_theta → {t_base:g})"),
                [Lead(CONFIG, "rope_theta", t_base, why, SOURCE)])
    return Finding(ROPE, Verdict.INCONCLUSIVE,
                   f"live engine: the draft's rope is built as its config states ({shown}); the "
                   f"positions each step hands it are not seen at start-up, so this does not "
                   f"clear rope-sync"), []


def _rope_text(b: dict[str, Any]) -> str:
    style = "neox" if b.get("is_neox_style") else "interleaved"
    extra = "" if b.get("class") == "RotaryEmbedding" else f" {b.get('class')}"
    return f"theta {b.get('base'):g} {style}{extra}" if isinstance(b.get("base"), (int, float)) \
        else f"{b.get('class')} {style}"


# -- mask and aux layers ----------------------------------------------------------------------

def draft_masks(view: EngineView) -> list[tuple[Layer, int | None, bool | None]]:
    """Each draft attention layer with the (window, causality) it attends with."""
    if view.draft is None:
        return []
    return [(x, x.window, view.draft_causal(x)) for x in view.draft.attention]


def mask_finding(view: EngineView, draft_cfg: dict[str, Any], method: str | None
                 ) -> Finding | None:
    """A lead when a draft layer attends with another mask than its files state; None when
    every layer matches (whether that mask is the trained one is the masks experiment's)."""
    served = draft_masks(view)
    if not served:
        return None
    stated = stated_masks(draft_cfg, method, len(served))
    diffs = [f"{layer.name}: served {_show_mask(w, c)}, config states {_show_mask(*s)}"
             for (layer, w, c), s in zip(served, stated, strict=True)
             if (w, c) != s and c is not None]
    if not diffs:
        return None
    return Finding(MASK, Verdict.INCONCLUSIVE,
                   "live engine: the draft attends with another mask than its files state ("
                   + "; ".join(diffs[:4]) + "): a lead, not a verdict")


def aux_finding(view: EngineView, draft_cfg: dict[str, Any], target_cfg: dict[str, Any],
                draft_dir: Any, method: str | None) -> Finding | None:
    if method not in ("eagle3", "dflash") or view.aux_layers is None:
        return None
    stated = aux_layer_ids(method, draft_cfg)
    live = list(view.aux_layers)
    fc = fc_reads(draft_dir, target_cfg) if draft_dir is not None else None
    width = f"; the drafter's fc reads {fc} hidden states" if fc is not None else ""
    if stated is None:
        return Finding(CONFIG, Verdict.INCONCLUSIVE,
                       f"live engine: the drafter's config names no aux layers, so the target "
                       f"hands it its model's defaults {live}{width}: a lead (name the layers "
                       f"it was trained on)")
    if sorted(set(stated)) != sorted(set(live)):
        return Finding(CONFIG, Verdict.INCONCLUSIVE,
                       f"live engine: the target hands the drafter aux layers {live}, its "
                       f"config names {stated} (in vLLM's convention){width}: a lead")
    if fc is not None and fc not in (len(live), len(live) + 1):
        return Finding(CONFIG, Verdict.INCONCLUSIVE,
                       f"live engine: aux layers {live} as configured{width}: a lead")
    return None


def summary(view: EngineView) -> str:
    """The live engine's draft in one line, for the evidence."""
    parts = []
    for label, m in (("target", view.target), ("draft", view.draft)):
        if m is None:
            continue
        backends = sorted({x.backend for x in m.attention if x.backend})
        parts.append(f"{label} {m.cls} {m.dtype.replace('torch.', '')}, {len(m.attention)} "
                     f"attention layer(s) ({', '.join(backends) or 'backend unknown'}), "
                     f"{_layout(m)}")
    for layer, w, c in draft_masks(view)[:4]:
        parts.append(f"{layer.name}: {_show_mask(w, c)}")
    if view.aux_layers is not None:
        parts.append(f"aux layers {list(view.aux_layers)}")
    return "; ".join(parts)
