"""Which parallel settings a draft does not inherit from its target, read from vLLM's own code.

For each target ``ParallelConfig`` variation (TP, DCP, PCP, DP), built with the installed vLLM:
1. ``SpeculativeConfig.create_draft_parallel_config`` (what speculative.py gives draft models);
2. per method, the parallel config the proposer really runs with: its
   ``_create_draft_vllm_config`` called on a stand-in proposer (a real ``VllmConfig`` of the
   target, a speculative config carrying the draft parallel config of step 1).
Every dataclass field of ``ParallelConfig`` — enumerated from the installed class at run time,
never from a list here — is compared between target and draft; a field whose value differs is
"not inherited", shown with both values. A field step 1 drops and the proposer puts back is
"restored". Case B's bug is the DCP size dropped in step 1 and never restored.

Needs vLLM; step 2 needs a model directory (vLLM validates the target config against it, e.g.
DCP needs more TP ranks than KV heads). Building configs needs no device on the CPU platform.
A function missing from the installed version is reported, and the audit goes on.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# method → (module, proposer class) in vLLM 0.32's V1 spec decode; ngram has no proposer
# config of its own (speculative.py sets draft_parallel_config = target_parallel_config).
PROPOSERS: dict[str, tuple[str, str]] = {
    "draft_model": ("vllm.v1.spec_decode.draft_model", "DraftModelProposer"),
    "eagle3": ("vllm.v1.spec_decode.eagle", "EagleProposer"),
    "mtp": ("vllm.v1.spec_decode.eagle", "EagleProposer"),
    "dflash": ("vllm.v1.spec_decode.dflash", "DFlashProposer"),
}


@dataclass(frozen=True)
class Variation:
    name: str
    target: dict[str, Any]


# The target layouts of the audit; fields set beyond sizes make "not inherited" visible.
VARIATIONS: tuple[Variation, ...] = (
    Variation("tp4", {"tensor_parallel_size": 4}),
    Variation("tp4-dcp2", {"tensor_parallel_size": 4, "decode_context_parallel_size": 2,
                           "dcp_kv_cache_interleave_size": 2, "cp_kv_cache_interleave_size": 4,
                           "dcp_comm_backend": "a2a"}),
    Variation("tp4-pcp2", {"tensor_parallel_size": 4, "prefill_context_parallel_size": 2}),
    Variation("tp2-dp2", {"tensor_parallel_size": 2, "data_parallel_size": 2}),
)


@dataclass(frozen=True)
class FieldDiff:
    field: str
    target: str
    draft: str

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass
class MethodResult:
    method: str
    code: str                      # the vLLM function that decided
    lost: list[FieldDiff] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # dropped by step 1, not lost here
    shares_target: bool = False    # runs with the target's own ParallelConfig object
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "code": self.code, "error": self.error,
                "shares_target": self.shares_target,
                "lost": [d.to_json() for d in self.lost], "restored": self.restored}


@dataclass
class VariationResult:
    name: str
    target_args: dict[str, Any]
    error: str | None = None
    dropped_by_create: list[FieldDiff] = field(default_factory=list)
    methods: list[MethodResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "target_args": self.target_args, "error": self.error,
                "dropped_by_create_draft_parallel_config":
                    [d.to_json() for d in self.dropped_by_create],
                "methods": [m.to_json() for m in self.methods]}


@dataclass
class ParallelAudit:
    vllm_version: str
    fields: list[str]
    variations: list[VariationResult]
    notes: list[str] = field(default_factory=list)

    def lost_by_method(self) -> dict[str, list[str]]:
        """Per method, the fields some variation showed not inherited (sorted, unique)."""
        out: dict[str, set[str]] = {}
        for v in self.variations:
            for m in v.methods:
                out.setdefault(m.method, set()).update(d.field for d in m.lost)
        return {k: sorted(s) for k, s in out.items()}

    def to_json(self) -> dict[str, Any]:
        return {"vllm_version": self.vllm_version, "fields": self.fields, "notes": self.notes,
                "lost_by_method": self.lost_by_method(),
                "variations": [v.to_json() for v in self.variations]}


def field_names(cls: type) -> list[str]:
    """Every dataclass field of the class as installed (run time, so added fields count)."""
    return [f.name for f in dataclasses.fields(cls)]


def diff(names: Sequence[str], target: Any, draft: Any) -> list[FieldDiff]:
    """Fields whose value the draft does not share with the target (absent counts)."""
    out = []
    for n in names:
        a, b = getattr(target, n, _ABSENT), getattr(draft, n, _ABSENT)
        try:
            same = a == b
        except Exception:  # noqa: BLE001 - objects that refuse comparison
            same = a is b
        if not (same is True):
            out.append(FieldDiff(n, _show(a), _show(b)))
    return out


_ABSENT = object()


def _show(x: Any) -> str:
    if x is _ABSENT:
        return "(absent)"
    s = repr(x)
    return s if len(s) <= 120 else s[:117] + "..."


def audit_parallel(model_dir: Path | None = None,
                   variations: Sequence[Variation] = VARIATIONS,
                   methods: Sequence[str] = (*PROPOSERS, "ngram"),
                   parallel_cls: type | None = None,
                   on_progress: Callable[[str], None] | None = None) -> ParallelAudit:
    """Run the audit with the installed vLLM. ``parallel_cls``: the class targets are built
    from (default vLLM's ``ParallelConfig``; a subclass with an extra field shows that fields
    come from the class, not from a list)."""
    import vllm
    from vllm.config import ParallelConfig, SpeculativeConfig

    cls = parallel_cls or ParallelConfig
    names = field_names(cls)
    notes: list[str] = []
    create = getattr(SpeculativeConfig, "create_draft_parallel_config", None)
    if create is None:
        notes.append("this vLLM has no SpeculativeConfig.create_draft_parallel_config: "
                     "step 1 skipped")
    model_config = None
    if model_dir is not None:
        model_config = _model_config(model_dir, notes)
    else:
        notes.append("no model directory given: the per-method step (the proposers' own "
                     "_create_draft_vllm_config) needs one to build the target's VllmConfig")
    results = []
    for var in variations:
        if on_progress:
            on_progress(f"variation {var.name}")
        results.append(_variation(var, cls, names, create, model_config, methods))
    return ParallelAudit(getattr(vllm, "__version__", "?"), names, results, notes)


def _model_config(model_dir: Path, notes: list[str]) -> Any:
    from vllm.config import ModelConfig

    try:
        return ModelConfig(model=str(model_dir), dtype="float32", max_model_len=256)
    except Exception as exc:  # noqa: BLE001 - say why, audit step 1 anyway
        notes.append(f"cannot build a ModelConfig from {model_dir}: {exc!r}"[:400])
        return None


def _variation(var: Variation, cls: type, names: list[str], create: Any, model_config: Any,
               methods: Sequence[str]) -> VariationResult:
    res = VariationResult(var.name, dict(var.target))
    try:
        target = cls(**var.target)
    except Exception as exc:  # noqa: BLE001
        res.error = f"vLLM refused the target parallel config: {exc!r}"[:400]
        return res
    draft = None
    if create is not None:
        try:
            draft = create(target, target.tensor_parallel_size, draft_model_config=None)
        except TypeError:
            draft = create(target, target.tensor_parallel_size)  # older signature
        except Exception as exc:  # noqa: BLE001
            res.error = f"create_draft_parallel_config failed: {exc!r}"[:400]
        if draft is not None:
            res.dropped_by_create = diff(names, target, draft)
    vllm_config = None
    if model_config is not None:
        try:
            from vllm.config import VllmConfig

            vllm_config = VllmConfig(parallel_config=target, model_config=model_config)
        except Exception as exc:  # noqa: BLE001
            res.error = f"vLLM refused this layout for the model: {exc!r}"[:400]
    dropped = {d.field for d in res.dropped_by_create}
    for method in methods:
        res.methods.append(_method(method, target, draft, vllm_config, model_config, names,
                                   dropped))
    return res


def _method(method: str, target: Any, draft: Any, vllm_config: Any, model_config: Any,
            names: list[str], dropped: set[str]) -> MethodResult:
    if method == "ngram":
        # speculative.py: "self.draft_parallel_config = self.target_parallel_config"
        return MethodResult(method, "vllm/config/speculative.py (ngram shares the target's "
                                    "ParallelConfig object)", shares_target=True)
    where = PROPOSERS.get(method)
    if where is None:
        return MethodResult(method, "?", error=f"no proposer known for method {method!r}")
    mod_name, cls_name = where
    code = f"{mod_name}.{cls_name}._create_draft_vllm_config"
    if vllm_config is None or draft is None:
        why = ("vLLM refused this target layout (above)" if model_config is not None else
               "needs the target's VllmConfig: pass a model directory")
        return MethodResult(method, code, error=f"not run: {why}")
    try:
        import importlib

        proposer_cls = getattr(importlib.import_module(mod_name), cls_name)
        fn = proposer_cls._create_draft_vllm_config
    except (ImportError, AttributeError) as exc:
        return MethodResult(method, code, error=f"this vLLM lacks {code}: {exc}")
    stand_in = proposer_cls.__new__(proposer_cls)
    stand_in.vllm_config = vllm_config
    stand_in.speculative_config = types.SimpleNamespace(
        method=method, moe_backend=None, attention_backend=None, kv_cache_dtype=None,
        draft_parallel_config=draft, target_parallel_config=target,
        draft_model_config=model_config, num_speculative_tokens=1)
    stand_in.dflash_causal = False
    try:
        effective = fn(stand_in).parallel_config
    except Exception as exc:  # noqa: BLE001
        return MethodResult(method, code, error=f"vLLM's code failed on the stand-in: {exc!r}"[:400])
    lost = diff(names, target, effective)
    lost_names = {d.field for d in lost}
    shares = effective is target
    return MethodResult(method, code, lost, [] if shares else sorted(dropped - lost_names),
                        shares_target=shares)
