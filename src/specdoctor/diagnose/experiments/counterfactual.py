"""Counterfactuals on the drafter's config: the same drafter with one suspicious field set to
the target's value (or the method's published default), run through the oracle or relaunched.

This is the only way ``draft-config-mismatch`` (and ``attention-mask`` through a mask field) is
confirmed: a field whose change recovers acceptance. A field whose change does not recover is
excluded. A difference alone is no verdict: fields that independent drafters legitimately set
their own way (sizes, layers, head dims, dtype, max positions) are never leads.

The changed drafter is a copy under a neutral temporary name (``cf-<n>/draft``), so nothing in
its path says what was changed.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specdoctor.diagnose import rules
from specdoctor.diagnose.experiments import common
from specdoctor.diagnose.experiments.oracle import expected_profile, oracle_unavailable, run_oracle
from specdoctor.experiments.base import Context, ExperimentResult, Finding, Verdict

_ABSENT = object()
# Fields that change what the drafter computes when they differ from the target's: rotary
# embedding, normalisation, activation. Compared with the target's value.
WIRING_FIELDS = ("rope_theta", "rope_parameters.rope_theta", "rope_parameters.rope_type",
                 "rope_scaling", "partial_rotary_factor", "rms_norm_eps", "hidden_act")
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


@dataclass(frozen=True)
class Lead:
    field: str
    draft_value: Any
    value: Any            # the counterfactual value (_ABSENT: remove the field)
    hypothesis: str
    why: str

    def change(self) -> str:
        v = "(removed)" if self.value is _ABSENT else json.dumps(self.value)
        return f"{self.field} {json.dumps(self.draft_value)} → {v}"


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


def leads(draft: dict[str, Any], target: dict[str, Any], method: str | None) -> list[Lead]:
    """The fields worth a counterfactual, each with the value to try (pure)."""
    out: list[Lead] = []
    for f in WIRING_FIELDS:
        d, t = get(draft, f), get(target, f)
        if d is not _ABSENT and t is not _ABSENT and d != t:
            out.append(Lead(f, d, t, "draft-config-mismatch",
                            f"the drafter's {f} differs from the target's"))
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
    """A copy of the drafter under a neutral name with the lead's field changed."""
    out = workdir / f"cf-{n}" / "draft"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(draft_dir, out, symlinks=False)
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(put(cfg, lead.field, lead.value), indent=2))
    return out


def _leads_for(ctx: Context) -> tuple[list[Lead], list[str]]:
    if ctx.draft_dir is None or ctx.target_dir is None:
        return [], []
    d, t = common.read_config(ctx.draft_dir), common.read_config(ctx.target_dir)
    return leads(d, t, ctx.method), benign_differences(d, t)


def _no_leads(exp: str, hypotheses: tuple[str, ...], benign: list[str]) -> ExperimentResult:
    why = "no field that changes drafting or the mask differs from the target or the " \
          "method's default: nothing to set"
    if benign:
        why += f" (differences seen, none a lead: {'; '.join(benign)})"
    return ExperimentResult(exp, [Finding(h, Verdict.EXCLUDED, why) for h in hypotheses
                                  if h in ("draft-config-mismatch", "attention-mask")])


def _ceiling(ctx: Context) -> float:
    return float(ctx.k or 1)


def _verdicts(exp: str, hypotheses: tuple[str, ...], tried: list[Finding]) -> list[Finding]:
    """Per hypothesis: confirmed if one of its fields recovered, else excluded (all tried)."""
    out = list(tried)
    for h in hypotheses:
        mine = [f for f in tried if f.hypothesis == h]
        if not mine and h in ("draft-config-mismatch", "attention-mask"):
            out.append(Finding(h, Verdict.EXCLUDED, "no field of this kind differs"))
    return out


class OracleCounterfactual:
    """Through the oracle: no restart, methods the oracle covers."""

    id = "oracle-counterfactual"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method == "ngram":
            return "prompt lookup has no drafter config"
        return oracle_unavailable(ctx)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        found, benign = _leads_for(ctx)
        if not found:
            return _no_leads(self.id, hypotheses, benign)
        base = ctx.data.get("oracle_greedy") or run_oracle(ctx, 0.0, 1.0)
        ctx.data["oracle_greedy"] = base
        before = common.apd(expected_profile(base))
        tried, curves, nums = [], {"before": expected_profile(base)}, {}
        for n, lead in enumerate(found):
            if lead.hypothesis not in hypotheses:
                continue
            ctx.progress(f"oracle counterfactual: {lead.change()}")
            after_res = run_oracle(ctx, 0.0, 1.0, patched_copy(ctx.draft_dir, lead, ctx.workdir, n))
            after = expected_profile(after_res)
            a = common.apd(after)
            # greedy oracle: deterministic, so any change beyond numerics is real
            f = rules.decide_counterfactual(lead.hypothesis, lead.change() + " (oracle)", before,
                                            a, _ceiling(ctx), significant=a - before > 0.05 * max(before, 0.1))
            tried.append(f)
            curves[f"after {lead.change()}"] = after
            nums[lead.field] = {"before": round(before, 4), "after": round(a, 4)}
        return ExperimentResult(self.id, _merge(_verdicts(self.id, hypotheses, tried)), nums, curves,
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
        before_p = ctx.measured["greedy"].total
        before = common.apd(before_p)
        tried, curves, nums, cmds, errors = [], {"before": before_p}, {}, [], []
        for n, lead in enumerate(found):
            copy = patched_copy(ctx.draft_dir, lead, ctx.workdir, 100 + n)
            sc = dict(ctx.launch.speculative_config() or {})
            sc["model"] = str(copy)
            launch = ctx.launch.with_speculative_config(sc)
            cmds.append(launch.shell_command())
            m, _log, err = common.measure_launch(ctx, launch, common.params(ctx),
                                                 f"counterfactual-{n}")
            if m is None or m.total is None:
                errors.append(f"{lead.change()}: {err}")
                tried.append(Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                                     f"{lead.change()}: relaunch failed: {err}"))
                continue
            a = common.apd(m.total)
            f = rules.decide_counterfactual(
                lead.hypothesis, lead.change() + " (relaunched)", before, a, _ceiling(ctx),
                common.significantly_higher(m.total, before_p))
            tried.append(f)
            curves[f"after {lead.change()}"] = m.total
            nums[lead.field] = {"before": round(before, 4), "after": round(a, 4)}
            if f.verdict is Verdict.CONFIRMED:
                break  # one field that recovers is the answer; the rest stay untested
        found_h = {f.hypothesis for f in tried}
        out = [replace(f) for f in tried]
        for h in hypotheses:
            if h not in found_h and h in ("draft-config-mismatch", "attention-mask"):
                out.append(Finding(h, Verdict.EXCLUDED, "no field of this kind differs"))
        return ExperimentResult(self.id, _merge(out), nums, curves, cmds,
                                "; ".join(errors) or None, time.perf_counter() - t0)


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per hypothesis: confirmed wins; else excluded only if every field was."""
    by: dict[str, list[Finding]] = {}
    for f in findings:
        by.setdefault(f.hypothesis, []).append(f)
    out = []
    for h, fs in by.items():
        conf = [f for f in fs if f.verdict is Verdict.CONFIRMED]
        if conf:
            out.append(max(conf, key=lambda f: f.recovered or 0.0))
            continue
        verdict = (Verdict.EXCLUDED if all(f.verdict is Verdict.EXCLUDED for f in fs)
                   else Verdict.INCONCLUSIVE)
        out.append(Finding(h, verdict, "; ".join(f.evidence for f in fs)))
    return out
