"""The engine's own configuration functions, run on the served config, as a verdict experiment
of ``specdoctor diagnose`` (catalogue id ``astexec``; ``attention-mask``, leads for
``draft-config-mismatch``).

What it does (Case A's static method): cut the functions the installed vLLM resolves a drafter's
settings with out of their files and run them in the sandbox (``run.astexec``) on the served
``config.json``, built as the engine builds it (the transformers config class of its
``model_type``), without importing vLLM:

- DFlash: ``_resolve_layer_attention`` per draft layer (window, causality), and
  ``dflash_has_any_non_causal``, the causality DFlash's attention metadata gives every layer;
  the rope theta default its decoder layer applies (``set_default_rope_theta``);
- EAGLE3 and DFlash: ``get_eagle3_aux_layers_from_config``, the aux layers the target hands the
  drafter, and where it names none, the model's default (``get_eagle3_default_aux_hidden_
  state_layers`` on a model of the target's depth).

The result (``CodeView``) is left in ``ctx.code_view`` for the masks and kernel experiments.
Decisions (``decide``), by the rules ``difference-not-verdict`` and ``counterfactual-only``:
a resolution that departs from the method's own mask, a metadata causality other than the
layers', aux layers outside the target or not as many as the drafter's ``fc`` reads, or a rope
theta the engine defaults where the target's differs, is a lead (inconclusive, with the
counterfactual's field in ``ctx.leads``). ``attention-mask`` is excluded when every draft layer
resolves to the method's own mask with no window (no backend's window convention can then
differ); with a window, the masks experiment decides. ``draft-config-mismatch`` is never
excluded here.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Lead, Verdict
from specdoctor.served_files import fc_reads, rope_view

MASK = "attention-mask"
CONFIG = "draft-config-mismatch"
DFLASH = "vllm.model_executor.models.qwen3_dflash"
EAGLE3_UTILS = "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils"
INTERFACES = "vllm.model_executor.models.interfaces"
HF_UTILS = "vllm.transformers_utils.config"
METHODS = ("dflash", "eagle3")
_DEFAULT_THETA = re.compile(
    r"set_default_rope_theta\(\s*config\s*,\s*default_theta\s*=\s*([\d_.e]+)")


@dataclass
class CodeView:
    """What the engine's own functions make of the served config."""

    method: str
    layers: tuple[tuple[int | None, bool], ...] = ()    # per draft layer (window, causal)
    metadata_causal: bool | None = None                 # DFlash: the one causality all get
    aux_layers: tuple[int, ...] | None = None           # from the config; None: none named
    default_aux: tuple[int, ...] | None = None          # the model's default when none named
    rope_theta: float | None = None                     # after the engine's default
    theta_default: float | None = None                  # the default it would apply
    errors: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # file -> sha256

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "layers": [list(x) for x in self.layers],
                "metadata_causal": self.metadata_causal,
                "aux_layers": None if self.aux_layers is None else list(self.aux_layers),
                "default_aux": None if self.default_aux is None else list(self.default_aux),
                "rope_theta": self.rope_theta, "theta_default": self.theta_default,
                "errors": self.errors, "files": self.files}


def config_class(cfg: dict[str, Any]) -> str | None:
    """The transformers config class the engine builds this config as (by its model_type)."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        return None
    name = CONFIG_MAPPING_NAMES.get(str(cfg.get("model_type")))
    return f"transformers.{name}" if name else None


def _call(view: CodeView, file: str, names: list[str], calls: list[str], **kw: Any) -> list[Any]:
    """Run the cut; each call's value (None where it raised: the error is kept)."""
    from specdoctor.experiments.astexec.run import astexec

    out = astexec(file, names, calls=calls, **kw)
    view.files[out["file"]] = out["file_sha256"]
    for err in out.get("definition_errors", []):
        view.errors.append(f"{file}: defining {err.get('name', '?')}: {err.get('message', err)}")
    values = []
    for c in out.get("calls", []):
        if "error" in c:
            e = c["error"]
            view.errors.append(f"{file}: {c.get('call', '')}: {e.get('type')}: "
                               f"{str(e.get('message', ''))[:200]}")
            values.append(None)
        else:
            values.append(c.get("value"))
    return values


def code_view(method: str, config_path: Path, cfg: dict[str, Any], target_layers: int | None
              ) -> CodeView:
    """Run the engine's functions on the served config (one sandbox per engine file)."""
    v = CodeView(method)
    cls = config_class(cfg)
    kw: dict[str, Any] = {"config_path": config_path, "config_class": cls}
    n = int(cfg.get("num_hidden_layers") or 1)
    if method == "dflash":
        resolved, any_nc = _call(
            v, DFLASH, ["_dflash_layer_causal", "_resolve_layer_attention",
                        "dflash_has_any_non_causal"],
            [f"[_resolve_layer_attention(config, i) for i in range({n})]",
             "dflash_has_any_non_causal(config)"],
            stubs=["get_current_vllm_config=lambda: SimpleNamespace(use_v2_model_runner=True)"],
            **kw)
        if isinstance(resolved, list):
            v.layers = tuple((w if isinstance(w, int) else None, bool(c)) for w, c in resolved)
        if isinstance(any_nc, bool):
            v.metadata_causal = not any_nc
        v.theta_default = _theta_default()
        if v.theta_default is not None:
            (rope,) = _call(v, HF_UTILS, ["set_default_rope_theta"],
                            [f"(set_default_rope_theta(config, default_theta={v.theta_default!r}"
                             f"), dict(config.rope_parameters))[1]"], **kw)
            if isinstance(rope, dict) and isinstance(rope.get("rope_theta"), (int, float)):
                v.rope_theta = float(rope["rope_theta"])
    # The aux-layer function reads three attributes as written: the plain config will do (a
    # sandbox without transformers to import starts in a fraction of the time).
    (aux,) = _call(v, EAGLE3_UTILS, ["get_eagle3_aux_layers_from_config"],
                   ["get_eagle3_aux_layers_from_config(SimpleNamespace(draft_model_config="
                    "SimpleNamespace(hf_config=config)))"], config_path=config_path)
    v.aux_layers = tuple(int(i) for i in aux) if isinstance(aux, list) else None
    if v.aux_layers is None and target_layers:
        fn = "SupportsEagle3.get_eagle3_default_aux_hidden_state_layers"
        (dflt,) = _call(v, INTERFACES, [fn],
                        [f"{fn}(SimpleNamespace(model=SimpleNamespace(layers=[None] * "
                         f"{int(target_layers)})))"])
        v.default_aux = tuple(int(i) for i in dflt) if isinstance(dflt, list) else None
    return v


def _theta_default() -> float | None:
    """The rope theta DFlash's decoder layer defaults to, read from the installed file."""
    from specdoctor.experiments.astexec.run import resolve_file

    try:
        text = resolve_file(DFLASH).read_text()
    except (SpecdoctorError, OSError):
        return None
    m = _DEFAULT_THETA.search(text)
    return float(m.group(1).replace("_", "")) if m else None


def _mask_text(window: int | None, causal: bool) -> str:
    return f"{'causal' if causal else 'non-causal'}, " + (
        f"window {window}" if window is not None else "no window")


def decide(v: CodeView, cfg: dict[str, Any], target: dict[str, Any], fc_states: int | None,
           hypotheses: tuple[str, ...]) -> tuple[list[Finding], list[Lead]]:
    """The findings of the engine's own reading of the config (pure)."""
    from specdoctor.experiments.masks.experiment import departure_leads

    found: list[Finding] = []
    leads: list[Lead] = []
    files = ", ".join(f"{Path(f).name} @ {sha[:12]}" for f, sha in v.files.items())
    if MASK in hypotheses and v.method == "dflash" and v.layers:
        per = [_mask_text(w, c) for w, c in v.layers]
        mixed = v.metadata_causal is not None and any(c != v.metadata_causal
                                                      for _, c in v.layers)
        off = [i for i, (w, c) in enumerate(v.layers) if w is not None or c]
        if off or mixed:
            lead = departure_leads("dflash", cfg, len(v.layers))
            leads += lead
            why = []
            if off:
                why.append(f"layers {off} resolve to {', '.join(sorted(set(per[i] for i in off)))}"
                           f", not DFlash's own non-causal block without a window")
            if mixed:
                why.append(f"the attention metadata gives every layer causal="
                           f"{v.metadata_causal} while the layers resolve {per}")
            found.append(Finding(MASK, Verdict.INCONCLUSIVE,
                                 f"the engine's own functions ({files}) on the served config: "
                                 + "; ".join(why) + (f"; counterfactual: "
                                                     f"{', '.join(x.field for x in lead)}"
                                                     if lead else "") + ": a lead"))
        else:
            found.append(Finding(MASK, Verdict.EXCLUDED,
                                 f"the engine's own functions ({files}) resolve every draft "
                                 f"layer to DFlash's own mask ({per[0]}), and the metadata "
                                 f"agrees; with no window, no backend's window convention "
                                 f"applies"))
    if CONFIG in hypotheses:
        found.append(_config_finding(v, cfg, target, fc_states, files, leads, rope_view))
    return found, leads


def _config_finding(v: CodeView, cfg: dict[str, Any], target: dict[str, Any],
                    fc_states: int | None, files: str, leads: list[Lead], rope_view: Any
                    ) -> Finding:
    notes, bad = [], []
    n_target = target.get("num_hidden_layers")
    ids = v.aux_layers if v.aux_layers is not None else v.default_aux
    if ids is not None:
        src = "as configured" if v.aux_layers is not None else "the model's default (the " \
              "config names none)"
        out = [i for i in ids if isinstance(n_target, int) and not 0 <= i <= n_target]
        text = f"aux layers {list(ids)} ({src})"
        if out:
            bad.append(f"{text}: {out} name no layer of the {n_target}-layer target")
        elif fc_states is not None and fc_states not in (len(ids), len(ids) + 1):
            bad.append(f"{text}: the drafter's fc reads {fc_states} hidden states")
        elif v.aux_layers is None:
            bad.append(f"{text}: the drafter does not say which layers it was trained on")
        else:
            notes.append(f"{text}, within the target's {n_target} layers")
    t_theta = rope_view(target).get("rope_theta")
    if v.rope_theta is not None and "rope_theta" not in rope_view(cfg) and \
            isinstance(t_theta, (int, float)) and abs(v.rope_theta - t_theta) > 1e-6 * t_theta:
        why = (f"the drafter's config states no rope theta: the engine builds it with "
               f"{v.rope_theta:g} (its default), the target rotates with {t_theta:g}")
        bad.append(why)
        leads.append(Lead(CONFIG, "rope_theta", t_theta, why, "astexec"))
    elif v.rope_theta is not None:
        notes.append(f"rope theta {v.rope_theta:g}")
    errs = f"; errors: {'; '.join(v.errors[:2])}" if v.errors else ""
    if bad:
        return Finding(CONFIG, Verdict.INCONCLUSIVE, f"the engine's own functions ({files}): "
                       + "; ".join(bad) + f": a lead for the counterfactual{errs}")
    return Finding(CONFIG, Verdict.INCONCLUSIVE,
                   f"the engine's own functions ({files}) read the config as written ("
                   + ("; ".join(notes) or "nothing to compare") + "): no lead; only a "
                   f"counterfactual excludes a config field{errs}")


class Experiment:
    id = "astexec"

    def unavailable(self, ctx: Context) -> str | None:
        from specdoctor.experiments.astexec.run import resolve_file

        if ctx.method not in METHODS:
            return (f"no configuration function of the engine resolves a "
                    f"{ctx.method or 'this'} drafter's mask or aux layers: its config is read "
                    f"as written (the config audit and the masks experiment read it)")
        if ctx.draft_dir is None or not (ctx.draft_dir / "config.json").is_file():
            return "needs the drafter's directory (a launch command) to run on its config"
        try:
            resolve_file(DFLASH if ctx.method == "dflash" else EAGLE3_UTILS)
        except SpecdoctorError:
            return "vLLM's source is not installed here: pass a recon snapshot by hand " \
                   "(specdoctor astexec SNAPSHOT/vllm/...)"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        assert ctx.draft_dir is not None and ctx.method is not None
        cfg, target, _ = common.configs(ctx)
        v = code_view(ctx.method, ctx.draft_dir / "config.json", cfg,
                      target.get("num_hidden_layers"))
        ctx.code_view = v
        found, leads = decide(v, cfg, target, fc_reads(ctx.draft_dir, target), hypotheses)
        ctx.leads.extend(leads)
        cmds = [f"specdoctor astexec {DFLASH} _resolve_layer_attention --config "
                f"{ctx.draft_dir / 'config.json'} --stub get_current_vllm_config=raise --call "
                f"'[_resolve_layer_attention(config, i) for i in range(config.num_hidden_layers)]'"
                ] if ctx.method == "dflash" else []
        return ExperimentResult(self.id, found, {"code_view": v.to_json(),
                                                 "leads": [x.to_json() for x in leads]},
                                commands=cmds, wall_s=time.perf_counter() - t0)

