"""The drafter's contract for one served setup: what the installed vLLM reads of the drafter's
config and checkpoint for this method, how, and where (each file cited with its sha256).

``build(method, draft_cfg, target_cfg)`` walks vLLM's source (``scope``); where vLLM is not
installed it falls back to the oracle's own loaders (``specdoctor.oracle.heads``, transformers'
modeling file for a draft model), which follow vLLM 0.32 — the contract then says so. The oracle's
reads are kept beside vLLM's either way (``oracle_keys``): a key vLLM reads and the oracle does
not cannot be decided by an oracle counterfactual (the oracle would not see the change), only by
a relaunch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.experiments.contract import scope
from specdoctor.experiments.contract.reads import (
    Found, Read, Seeds, SourceIndex, TensorRule, Walker, literal_default,
)

LAYER_IDS = re.compile(r"layer_ids$")
_CACHE: dict[tuple[Any, ...], Contract] = {}


@dataclass(frozen=True)
class AuxRule:
    """How vLLM turns the layer-id keys of a drafter config into the target states it taps."""

    offsets: dict[str, int]             # key -> what vLLM adds to each id (DFlash: + 1)
    lo: int                             # lowest and highest aux id the target hands out
    hi: int
    default: tuple[int, ...] | None     # the target model's own choice for its depth
    normalise: str | None               # what the target does to the ids (sorted, each once)
    where: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"offsets": self.offsets, "range": [self.lo, self.hi],
                "default": list(self.default) if self.default else None,
                "normalise": self.normalise, "where": list(self.where)}


@dataclass
class Contract:
    method: str
    engine: str                         # "vLLM 0.32.0", or the oracle's reading of it
    model_class: str | None
    reads: list[Read]
    tensors: list[TensorRule]
    aux: AuxRule | None
    files: list[dict[str, str]]         # {"file", "sha256"} of every file a read was found in
    oracle_keys: frozenset[str] | None = None
    notes: list[str] = field(default_factory=list)
    from_engine: bool = True            # False: the oracle's loaders stood in for vLLM

    def keys(self) -> set[str]:
        return {r.key for r in self.reads}

    def reads_of(self, key: str) -> list[Read]:
        return [r for r in self.reads if r.key == key]

    def is_read(self, key: str) -> bool:
        """Read as such, or inside a container that is read and handed on whole (none of its
        keys is read where the walk can see: something it could not follow may read them)."""
        if any(r.key == key and r.how != "set" for r in self.reads):
            return True
        if self.model_class is None and self.from_engine:
            return True    # the model's own reads are unknown: anything may be read
        parts = key.split(".")
        for i in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:i])
            if parent in self.keys() and not any(k.startswith(parent + ".") for k in self.keys()):
                return True
        return False

    def selector(self, key: str) -> bool:
        rs = [r for r in self.reads_of(key) if r.how != "set"]
        return bool(rs) and all(r.selector for r in rs)

    def default(self, key: str) -> tuple[bool, Any]:
        """(True, value) for the literal default vLLM reads ``key`` with (the drafter's own model
        file first); (False, None) where none is literal."""
        rs = sorted(self.reads_of(key), key=lambda r: not r.where.startswith(
            _model_file(self.model_class)))
        for r in rs:
            ok, v = literal_default(r)
            if ok:
                return True, v
        return False, None

    def normalisations(self, key: str) -> list[str]:
        return sorted({r.normalise for r in self.reads_of(key) if r.normalise})

    def writes(self, key: str) -> list[Read]:
        return [r for r in self.reads_of(key) if r.how == "set"]

    def oracle_reads(self, key: str) -> bool | None:
        """Whether the oracle reads ``key`` (or a container of it); None: not known."""
        if self.oracle_keys is None:
            return None
        parts = key.split(".")
        return any(".".join(parts[:i]) in self.oracle_keys for i in range(len(parts), 0, -1))

    def model_file(self) -> str:
        """The drafter's model file, as reads cite it ("vllm/model_executor/models/x.py")."""
        return _model_file(self.model_class)

    def where(self, key: str) -> str:
        rs = self.reads_of(key)
        return rs[0].where if rs else "?"

    def to_json(self) -> dict[str, Any]:
        by_key: dict[str, list[dict[str, Any]]] = {}
        for r in self.reads:
            by_key.setdefault(r.key, []).append(r.to_json())
        return {"method": self.method, "engine": self.engine, "model_class": self.model_class,
                "from_engine": self.from_engine, "keys": by_key,
                "tensors": [t.to_json() for t in self.tensors],
                "aux": self.aux.to_json() if self.aux else None, "files": self.files,
                "oracle_keys": sorted(self.oracle_keys) if self.oracle_keys is not None else None,
                "notes": self.notes}


def _model_file(model_class: str | None) -> str:
    if not model_class:
        return "\0"
    return "/".join(model_class.split(".")[:-1]) + ".py"


def build(method: str, draft_cfg: dict[str, Any], target_cfg: dict[str, Any]) -> Contract:
    """The contract of ``method`` as the installed vLLM reads it (cached per setup)."""
    text = target_cfg.get("text_config") or target_cfg
    layers = int(text.get("num_hidden_layers") or 0)
    key = (method, _arch(draft_cfg), _arch(target_cfg), layers)
    if key not in _CACHE:
        root = scope.vllm_root()
        _CACHE[key] = (_from_vllm(method, draft_cfg, target_cfg, layers, root)
                       if root is not None else _from_oracle(method, draft_cfg, layers))
    return _CACHE[key]


def _arch(cfg: dict[str, Any]) -> str | None:
    a = cfg.get("architectures")
    return str(a[0]) if isinstance(a, list) and a else None


def _from_vllm(method: str, draft_cfg: dict[str, Any], target_cfg: dict[str, Any],
               layers: int, root: Path) -> Contract:
    s = scope.walk(method, draft_cfg, target_cfg, root)
    index = SourceIndex(root, "vllm")
    aux = _aux_rule(s.found, index, target_cfg, layers)
    notes = list(s.notes)
    if aux is not None and aux.default is None:
        notes.append("the target model's default aux layers could not be read out of vLLM")
    return Contract(method, f"vLLM {scope.vllm_version()}", s.model_class, s.found.reads,
                    s.found.tensors, aux, _cited(s.found), oracle_keys(method, draft_cfg),
                    notes)


def _aux_rule(found: Found, index: SourceIndex, target_cfg: dict[str, Any], layers: int
              ) -> AuxRule | None:
    offsets: dict[str, int] = {}
    for r in found.reads:
        if LAYER_IDS.search(r.key) and r.how != "set":
            m = re.search(r"each \+ (\d+)", r.normalise or "")
            offsets[r.key] = max(offsets.get(r.key, 0), int(m.group(1)) if m else 0)
    if not offsets:
        return None
    rng = scope.aux_range(index, target_cfg, layers)
    default = scope.default_aux_layers(index, target_cfg, layers)
    norm = scope.aux_normalisation(index)
    lo, hi = rng.value if rng is not None else (0, layers)
    where = tuple(x.where for x in (rng, default, norm) if x is not None)
    return AuxRule(offsets, lo, hi, default.value if default else None,
                   norm.value if norm else None, where)


def _cited(found: Found) -> list[dict[str, str]]:
    rels = {rel: path for path, rel in found.rels.items()}
    used = sorted({r.where.split(":", 1)[0] for r in found.reads}
                  | {t.where.split(":", 1)[0] for t in found.tensors})
    out = []
    for rel in used:
        path = rels.get(rel)
        if path is not None and path.is_file():
            out.append({"file": rel, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return out


# -- the oracle's reading -------------------------------------------------------------------------

ORACLE_BUILDERS = {"eagle3": ("specdoctor.oracle.heads.eagle3", "build"),
                   "dflash": ("specdoctor.oracle.heads.dflash", "build"),
                   "mtp": ("specdoctor.oracle.heads.mtp", "build")}


def _package_root(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def oracle_found(method: str, draft_cfg: dict[str, Any]) -> Found | None:
    """What the oracle reads of the drafter's config: the head builder of
    ``specdoctor.oracle.heads`` for hidden-state drafters, transformers' model class for a
    draft model (the oracle runs it through transformers)."""
    if method in ORACLE_BUILDERS:
        root = _package_root("specdoctor")
        if root is None:
            return None
        index = SourceIndex(root, "specdoctor")
        mod_name, fn_name = ORACLE_BUILDERS[method]
        mod = index.module(mod_name)
        if mod is None or fn_name not in mod.defs:
            return None
        w = Walker(index, Seeds(names=("cfg",)))
        w.function(mod, mod.defs[fn_name])  # type: ignore[arg-type]
        return w.found
    if method == "draft_model":
        root = _package_root("transformers")
        arch, mtype = _arch(draft_cfg), draft_cfg.get("model_type")
        if root is None or not arch or not isinstance(mtype, str):
            return None
        index = SourceIndex(root, "transformers")
        cls = index.find_class(f"transformers.models.{mtype}.modeling_{mtype}", arch)
        if cls is None:
            return None
        w = Walker(index, Seeds(names=("config",)))
        w.instantiate(cls[0], cls[1])
        return w.found
    return None


def oracle_keys(method: str, draft_cfg: dict[str, Any]) -> frozenset[str] | None:
    found = oracle_found(method, draft_cfg)
    return None if found is None else frozenset(r.key for r in found.reads)


def _from_oracle(method: str, draft_cfg: dict[str, Any], layers: int) -> Contract:
    found = oracle_found(method, draft_cfg) or Found()
    from specdoctor.oracle.heads.conventions import VLLM_VERSION, default_aux_ids

    offsets = {"eagle_aux_hidden_state_layer_ids": 0,
               "eagle_config.eagle_aux_hidden_state_layer_ids": 0,
               "dflash_config.target_layer_ids": 1} if method in ("eagle3", "dflash") else {}
    aux = AuxRule(offsets, 0, layers, default_aux_ids(layers), "sorted, each once",
                  ("specdoctor/oracle/heads/conventions.py",)) if offsets else None
    return Contract(method, f"the oracle's reading of vLLM {VLLM_VERSION}", None, found.reads,
                    found.tensors, aux, _cited(found),
                    frozenset(r.key for r in found.reads),
                    [f"vLLM is not installed here: the contract is what the oracle's loaders "
                     f"read, which follow vLLM {VLLM_VERSION}"], from_engine=False)
