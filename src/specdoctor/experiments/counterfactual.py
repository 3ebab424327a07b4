"""Counterfactuals on the drafter's config: the same drafter with its suspicious fields set to
the target's values (or the method's published default), run through the oracle or relaunched.

This is the only way ``draft-config-mismatch`` (and ``attention-mask`` through a mask field) is
confirmed: a change that recovers acceptance. A change that does not recover is excluded. A
difference alone is no verdict: fields that independent drafters legitimately set their own way
(sizes, layers, head dims, dtype, max positions) are never leads.

Leads come from:
- scalar fields that change what the drafter computes (normalisation epsilon, activation, logit
  scaling): compared with the target's value; a field only one side has is compared with the
  default the other side gets, when both are the same architecture;
- the rotary embedding as a whole, whichever spelling each config uses (``rope_parameters``,
  ``rope_scaling``, top-level ``rope_theta``/``partial_rotary_factor``): its effective settings
  are compared, and the counterfactual gives the drafter the target's rope keys;
- mask fields and target-layer ids (below);
- the leads other experiments left in ``ctx.leads`` (``from_context``): a rope theta the live
  engine or the engine's own functions default where the target's differs, a mask field the
  masks experiment names.

Not a lead: ``tie_word_embeddings: true`` beside a checkpoint that ships its own ``lm_head``
(vLLM 0.32 and transformers both notice and keep the head; measured: no effect).

Several leads for one hypothesis are first tried together (one run excludes them all when that
does not recover); when together they recover, each is tried alone, as far as time allows, to
name the field.

The changed drafter is a copy under a neutral temporary name (``cf-<n>/draft``), so nothing in
its path says what was changed.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.experiments import common
from specdoctor.experiments import rules
from specdoctor.experiments.base import Context, ExperimentResult, Finding, Verdict
from specdoctor.experiments.config_audit.models import ROPE_CONTAINERS, ROPE_TOP_LEVEL, rope_view
from specdoctor.experiments.oracle_gap import (
    expected_profile, oracle_unavailable, run_oracle, served_oracle,
)

_ABSENT = object()
# Scalar fields that change what the drafter computes: normalisation, activation, logit and
# attention scaling (Llama, Qwen, Gemma, Granite spellings).
WIRING_FIELDS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon",
                 "hidden_act", "hidden_activation", "logit_scale", "attn_logit_softcapping",
                 "final_logit_softcapping", "query_pre_attn_scalar", "embedding_multiplier",
                 "residual_multiplier", "attention_multiplier", "logits_scaling")
# Fields that change the drafter's attention mask: compared with the target's value, or with the
# method's published default when the target has no such field.
MASK_FIELDS = ("sliding_window", "use_sliding_window", "dflash_config.use_swa",
               "dflash_config.causal", "is_causal")
PUBLISHED_DEFAULTS = {"dflash": {"dflash_config.use_swa": False, "dflash_config.causal": False,
                                 "is_causal": _ABSENT}}
# Layer-id lists that index the target's layers: ids outside the target read something else
# (the embeddings, a missing layer), the mark of the other counting convention.
LAYER_ID_FIELDS = ("dflash_config.target_layer_ids", "eagle_aux_hidden_state_layer_ids",
                   "eagle_config.eagle_aux_hidden_state_layer_ids")
# Minutes one relaunch takes when deciding whether another fits before the deadline.
RELAUNCH_MIN = 3.0


@dataclass(frozen=True)
class Lead:
    field: str            # what the evidence names
    draft_value: Any
    value: Any            # the counterfactual value (_ABSENT: the field removed)
    hypothesis: str
    why: str
    edits: tuple[tuple[str, Any], ...] = ()   # (dotted field, value or _ABSENT); () = field

    def change(self) -> str:
        return f"{self.field} {_show(self.draft_value)} → {_show(self.value)}"

    def config_edits(self) -> tuple[tuple[str, Any], ...]:
        return self.edits or ((self.field, self.value),)


def _show(v: Any) -> str:
    if v is _ABSENT:
        return "(absent)"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_show(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def joint(found: list[Lead]) -> Lead:
    """Several leads of one hypothesis as one change (their edits applied together)."""
    if len(found) == 1:
        return found[0]
    return Lead(" + ".join(x.field for x in found), {x.field: x.draft_value for x in found},
                {x.field: x.value for x in found}, found[0].hypothesis,
                "; ".join(x.why for x in found),
                tuple(e for x in found for e in x.config_edits()))


def get(cfg: dict[str, Any], dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def put(cfg: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(cfg))
    node = out
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if value is _ABSENT:
        node.pop(last, None)
    else:
        node[last] = value
    return out


def _rope_lead(draft: dict[str, Any], target: dict[str, Any]) -> Lead | None:
    """The rope as the config audit reads it (``rope_view``), with one difference on purpose:
    a theta only one side sets is not a lead here, as the other side's is the architecture's
    default, unknown here (the audit names that difference; a counterfactual needs a value)."""
    dv, tv = rope_view(draft), rope_view(target)
    keys = [k for k in sorted(dv.keys() | tv.keys()) if dv.get(k, _ABSENT) != tv.get(k, _ABSENT)
            and not (k == "rope_theta" and (k not in dv or k not in tv))]
    if not keys:
        return None
    edits = [(c, _ABSENT) for c in (*ROPE_CONTAINERS, *ROPE_TOP_LEVEL) if c in draft]
    edits += [(c, target[c]) for c in (*ROPE_CONTAINERS, *ROPE_TOP_LEVEL) if c in target]
    where = next((c for c in reversed(ROPE_CONTAINERS) if isinstance(draft.get(c), dict)),
                 next((c for c in reversed(ROPE_CONTAINERS) if isinstance(target.get(c), dict)),
                      "rope"))
    if len(keys) == 1:
        k = keys[0]
        name = k if k in draft and k in ROPE_TOP_LEVEL else f"{where}.{k}"
        return Lead(name, dv.get(k, _ABSENT), tv.get(k, _ABSENT), "draft-config-mismatch",
                    f"the drafter's rotary embedding differs from the target's ({k})",
                    tuple(edits))
    return Lead(where, {k: dv.get(k, _ABSENT) for k in keys},
                {k: tv.get(k, _ABSENT) for k in keys}, "draft-config-mismatch",
                f"the drafter's rotary embedding differs from the target's ({', '.join(keys)})",
                tuple(edits))


def _same_architecture(draft: dict[str, Any], target: dict[str, Any]) -> bool:
    return draft.get("model_type") is not None and \
        draft.get("model_type") == target.get("model_type")


def leads(draft: dict[str, Any], target: dict[str, Any], method: str | None) -> list[Lead]:
    """The changes worth a counterfactual, each with the value to try (pure)."""
    out: list[Lead] = []
    same = _same_architecture(draft, target)
    for f in WIRING_FIELDS:
        d, t = get(draft, f), get(target, f)
        if d == t or (d is _ABSENT and t is _ABSENT):
            continue
        if d is not _ABSENT and t is not _ABSENT:
            out.append(Lead(f, d, t, "draft-config-mismatch",
                            f"the drafter's {f} differs from the target's"))
        elif same:
            out.append(Lead(f, d, t, "draft-config-mismatch",
                            f"only {'the drafter' if t is _ABSENT else 'the target'} sets {f} "
                            f"(the other gets the architecture's default)"))
    rope = _rope_lead(draft, target)
    if rope is not None:
        out.append(rope)
    defaults = PUBLISHED_DEFAULTS.get(method or "", {})
    for f in MASK_FIELDS:
        d = get(draft, f)
        if d is _ABSENT:
            continue
        t = get(target, f)
        ref = t if t is not _ABSENT else defaults.get(f, _ABSENT)
        if ref is _ABSENT and f not in defaults:
            continue
        if d != ref and not (d in (False, None) and ref is _ABSENT):
            out.append(Lead(f, d, ref, "attention-mask",
                            f"the drafter's {f} differs from "
                            + ("the target's" if t is not _ABSENT else f"{method}'s default")))
    n_layers = target.get("num_hidden_layers")
    if isinstance(n_layers, int):
        for f in LAYER_ID_FIELDS:
            ids = get(draft, f)
            if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
                continue
            lo, hi = _layer_range(f, n_layers)
            if all(lo <= i <= hi for i in ids):
                continue
            shift = lo - min(ids) if min(ids) < lo else hi - max(ids)
            fixed = [i + shift for i in ids]
            out.append(Lead(f, ids, fixed, "draft-config-mismatch",
                            f"{f} {ids} reaches outside the target's layers [{lo}, {hi}]: the "
                            f"other counting convention shifts them by {shift:+d}"))
    return out


def _layer_range(field: str, n_layers: int) -> tuple[int, int]:
    # DFlash counts layer outputs 0..L-1; EAGLE3 counts layer inputs, 0 = the embeddings.
    return (0, n_layers - 1) if field.startswith("dflash") else (0, n_layers)


def benign_differences(draft: dict[str, Any], target: dict[str, Any]) -> list[str]:
    """Differences that are no lead (independent drafters may set them their own way)."""
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "intermediate_size", "dtype", "torch_dtype", "max_position_embeddings")
    return [rules.config_difference(k, draft[k], target[k]) for k in keys
            if k in draft and k in target and draft[k] != target[k]]


def patched_copy(draft_dir: Path, lead: Lead, workdir: Path, n: int) -> Path:
    """A copy of the drafter under a neutral name with the lead's fields changed."""
    out = workdir / f"cf-{n}" / "draft"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(draft_dir, out, symlinks=False)
    cfg = json.loads((out / "config.json").read_text())
    for field, value in lead.config_edits():
        cfg = put(cfg, field, value)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


def _leads_for(ctx: Context) -> tuple[list[Lead], list[str]]:
    if ctx.draft_dir is None or ctx.target_dir is None:
        return [], []
    d, t = common.read_config(ctx.draft_dir), common.read_config(ctx.target_dir)
    found = leads(d, t, ctx.method)
    return found + from_context(ctx.leads, d, {x.field for x in found}), benign_differences(d, t)


def from_context(found: list[Any], draft: dict[str, Any], known: set[str]) -> list[Lead]:
    """The leads other experiments left in the context (``base.Lead``: the probes' live view,
    the engine's own config functions, the masks), as counterfactual leads, a field once."""
    out: list[Lead] = []
    for x in found:
        if x.field in known:
            continue
        known.add(x.field)
        out.append(Lead(x.field, get(draft, x.field), _ABSENT if x.remove else x.value,
                        x.hypothesis, f"{x.why} ({x.source})"))
    return out


Trial = tuple[Finding, Any, dict[str, float]]   # finding, the curve after (or None), numbers


def search(found: list[Lead], hypotheses: tuple[str, ...], trial: Callable[[Lead, int], Trial],
           more: Callable[[], bool] = lambda: True) -> tuple[list[Finding], dict[str, Any],
                                                             dict[str, Any]]:
    """Try the leads of each hypothesis: alone when there is one; else together first, and,
    when together they recover, each alone (while ``more()``) to name the field.

    Returns the findings (several per hypothesis; ``rules.one_per_hypothesis`` reduces them),
    the curves after each change, and the numbers."""
    tried: list[Finding] = []
    curves: dict[str, Any] = {}
    nums: dict[str, Any] = {}
    n = 0

    def run(lead: Lead) -> Finding:
        nonlocal n
        f, curve, numbers = trial(lead, n)
        n += 1
        if curve is not None:
            curves[f"after {lead.change()}"] = curve
        nums[lead.field] = numbers
        return f

    for h in hypotheses:
        mine = [x for x in found if x.hypothesis == h]
        if not mine:
            continue
        together = run(joint(mine))
        if len(mine) == 1 or together.verdict is not Verdict.CONFIRMED:
            tried.append(together)
            continue
        alone: list[Finding] = []
        n_alone = 0
        for lead in mine:
            if not more():
                break
            n_alone += 1
            f = run(lead)
            if f.verdict is Verdict.CONFIRMED:
                alone.append(f)
        if alone:
            tried += alone   # the fields that recover alone name the cause
            continue
        rest = ("no field alone recovers: they act together" if n_alone == len(mine) else
                f"which of them alone: {len(mine) - n_alone} not run (time)")
        tried.append(Finding(h, Verdict.CONFIRMED, f"{together.evidence}; {rest}",
                             recovered=together.recovered))
    return tried, curves, nums


def _no_leads(exp: str, hypotheses: tuple[str, ...], benign: list[str]) -> ExperimentResult:
    why = "no field that changes drafting or the mask differs from the target or the " \
          "method's default: nothing to set"
    if benign:
        why += f" (differences seen, none a lead: {'; '.join(benign)})"
    return ExperimentResult(exp, [Finding(h, Verdict.EXCLUDED, why) for h in hypotheses
                                  if h in ("draft-config-mismatch", "attention-mask")])


def _ceiling(ctx: Context) -> float:
    return float(ctx.k or 1)


def _verdicts(hypotheses: tuple[str, ...], tried: list[Finding]) -> list[Finding]:
    """Per hypothesis: what its trials found, or excluded when none of its kind differs."""
    out = list(tried)
    for h in hypotheses:
        if h in ("draft-config-mismatch", "attention-mask") and \
                not any(f.hypothesis == h for f in tried):
            out.append(Finding(h, Verdict.EXCLUDED, "no field of this kind differs"))
    return out


class OracleCounterfactual:
    """Through the oracle: no restart, methods the oracle covers. Only where the engine reaches
    the oracle of the served files: otherwise the oracle does not read those files as the
    engine does, and what it shows after a change says nothing of the engine."""

    id = "oracle-counterfactual"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method == "ngram":
            return "prompt lookup has no drafter config"
        gap = ctx.oracle_gap
        if gap is not None and gap.below:
            return ("the engine accepts less than the oracle of the served files, so the oracle "
                    "does not run them as the engine does; a relaunch decides")
        return oracle_unavailable(ctx)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        found, benign = _leads_for(ctx)
        found = [lead for lead in found if lead.hypothesis in hypotheses]
        if not found:
            return _no_leads(self.id, hypotheses, benign)
        assert ctx.draft_dir is not None
        base = served_oracle(ctx)
        before = common.apd(expected_profile(base))

        def trial(lead: Lead, n: int) -> Trial:
            ctx.progress(f"oracle counterfactual: {lead.change()}")
            after = expected_profile(run_oracle(ctx, 0.0, 1.0, patched_copy(
                ctx.draft_dir, lead, ctx.workdir, n)))
            a = common.apd(after)
            f = rules.decide_counterfactual(lead.hypothesis, lead.change() + " (oracle)", before,
                                            a, _ceiling(ctx),
                                            significant=rules.oracle_change_is_real(before, a))
            return f, after, {"before": round(before, 4), "after": round(a, 4)}

        tried, curves, nums = search(found, hypotheses, trial)
        merged = rules.one_per_hypothesis(_verdicts(hypotheses, tried), evidence="decisive")
        return ExperimentResult(self.id, merged, nums,
                                {"before": expected_profile(base), **curves},
                                wall_s=time.perf_counter() - t0)


class RelaunchCounterfactual:
    """Relaunch the user's command with the drafter copy: any method the engine serves."""

    id = "relaunch-counterfactual"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command (diagnose --launch '...', or the lab)"
        if ctx.draft_dir is None:
            return "the drafter has no directory of its own (ngram, mtp)"
        if "greedy" not in ctx.measured:
            return "no greedy measurement to compare with"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        found, benign = _leads_for(ctx)
        found = [lead for lead in found if lead.hypothesis in hypotheses]
        if not found:
            return _no_leads(self.id, hypotheses, benign)
        assert ctx.launch is not None and ctx.draft_dir is not None
        before_p = ctx.measured["greedy"].total
        before = common.apd(before_p)
        cmds: list[str] = []
        errors: list[str] = []

        def trial(lead: Lead, n: int) -> Trial:
            assert ctx.launch is not None and ctx.draft_dir is not None
            copy = patched_copy(ctx.draft_dir, lead, ctx.workdir, 100 + n)
            launch = ctx.launch.with_speculative(drafter=str(copy))
            cmds.append(launch.shell_command())
            m, _log, err = common.measure_launch(ctx, launch, common.params(ctx),
                                                 f"counterfactual-{n}")
            if m is None or m.total is None:
                errors.append(f"{lead.change()}: {err}")
                return (Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                                f"{lead.change()}: relaunch failed: {err}"), None, {})
            a = common.apd(m.total)
            f = rules.decide_counterfactual(
                lead.hypothesis, lead.change() + " (relaunched)", before, a, _ceiling(ctx),
                common.significantly_higher(m.total, before_p))
            return f, m.total, {"before": round(before, 4), "after": round(a, 4)}

        def more() -> bool:
            deadline = ctx.deadline
            return deadline is None or time.monotonic() + RELAUNCH_MIN * 60 < deadline

        tried, curves, nums = search(found, hypotheses, trial, more)
        merged = rules.one_per_hypothesis(_verdicts(hypotheses, tried), evidence="decisive")
        return ExperimentResult(self.id, merged, nums,
                                {"before": before_p, **curves}, cmds,
                                "; ".join(errors) or None, time.perf_counter() - t0)
