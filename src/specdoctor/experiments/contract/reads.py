"""Which keys of a config a piece of Python reads, found by reading its source (``ast``; nothing
is imported or run).

A small abstract interpreter walks each function once, in order, both branches of every ``if``:
values are *config values* (``Cfg``: the drafter's config, or a key under it), literals, or
object instances (``self`` and what it builds). A config value starts where the caller says
(``Seeds``: names, parameter names, attribute chains such as ``draft_model_config.hf_config``)
and flows through assignments, ``self.x = ...``, ``or`` fallbacks, calls into functions and
classes of the indexed source (arguments bound to parameters, string literals too, so
``getattr(config, name)`` inside a helper resolves), and return values. Each of these is a read:

    config.key                      attribute      (no default: the config class's own)
    getattr(config, "key", d)       getattr        default d
    hasattr(config, "key")          hasattr
    cfg.get("key", d)               get            default d
    cfg["key"]                      subscript
    "key" in cfg                    in

and ``config.key = v`` / ``cfg.update({"key": v})`` are writes (the engine sets the key itself).
A read wrapped in ``bool()``, ``int()``, ``sorted()``… or mapped ``[i + 1 for i in ...]`` carries
that normalisation; a read only compared with string literals (``model_type == "x"``) selects
code rather than parametrising it. In a function named ``load_weights``, ``if "t2d" in name:
continue`` and ``mapping["fc."] = None`` under ``if not <flag>`` are tensor rules: checkpoint
tensors the engine skips, always or when a config flag says so.

Over-approximation is deliberate: every branch counts, a base class's methods count even where a
subclass never calls them. A key read somewhere it does not matter costs a counterfactual that
excludes it; a key missed would be dismissed as ignored.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Calls that hand a config value through with a normalisation the read then carries.
NORMALISERS = ("bool", "int", "float", "str", "tuple", "list", "sorted", "set", "len", "abs")
# Methods of a dict or a config object that are not keys.
MAPPING_METHODS = ("get", "update", "items", "keys", "values", "pop", "setdefault", "to_dict",
                   "copy", "to_json_string", "get_text_config", "__contains__")
MAX_DEPTH = 24
MAX_WALKS = 6   # walks of one function with different config bindings


@dataclass(frozen=True)
class Cfg:
    """A config (``path`` "") or the value of a key under it; ``default``: what the engine uses
    when the key is absent (a literal, another ``Cfg``, or None when the read names none)."""

    path: str
    default: Any = None

    def key(self, name: str, default: Any = None) -> Cfg:
        return Cfg(f"{self.path}.{name}" if self.path else name, default)


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(eq=False)
class Inst:
    """An object built by an indexed class (its attributes as the walk saw them set)."""

    cls: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ref:
    """A function or class of the index held in a variable (a parameter's default)."""

    mod: Any
    defn: Any


@dataclass(frozen=True)
class Read:
    key: str                  # dotted path in the config ("dflash_config.mask_token_id")
    how: str                  # attribute | getattr | hasattr | get | subscript | in | set
    where: str                # "file.py:123 (Class.function)"
    default: str | None = None     # the default's source text, where the read names one
    normalise: str | None = None   # "bool()", "each + 1", ...
    selector: bool = False    # only compared with literals: selects code

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "how": self.how, "where": self.where}
        for k in ("default", "normalise"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.selector:
            out["selector"] = True
        return out


@dataclass(frozen=True)
class TensorRule:
    """Checkpoint tensors whose name contains ``pattern`` are not loaded: always (``flag``
    None), or while the config value ``flag`` is not ``keep_when``."""

    pattern: str
    where: str
    flag: Cfg | None = None
    keep_when: bool = True
    on_checkpoint: bool = False   # decided by what the checkpoint ships, not by the config

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pattern": self.pattern, "where": self.where}
        if self.flag is not None:
            out["flag"] = self.flag.path
            out["kept_when"] = self.keep_when
        if self.on_checkpoint:
            out["decided_by"] = "the checkpoint's own tensors"
        return out


@dataclass(frozen=True)
class Seeds:
    """Where config values start: names, unbound parameter names, and attribute chains whose
    dotted text ends with one of ``chains`` (e.g. ``draft_model_config.hf_config``)."""

    names: tuple[str, ...] = ()
    chains: tuple[str, ...] = ()


# -- the indexed source ---------------------------------------------------------------------------

@dataclass
class Module:
    name: str          # dotted module name
    path: Path
    rel: str           # path shown in citations ("vllm/model_executor/models/llama.py")
    tree: ast.Module
    defs: dict[str, ast.AST]         # top-level functions and classes
    imports: dict[str, tuple[str, str | None]]   # local name -> (module, name or None: module)


class SourceIndex:
    """Python source under ``root`` (a package directory, e.g. site-packages/vllm), parsed on
    demand by dotted module name."""

    def __init__(self, root: Path, package: str) -> None:
        self.root, self.package = root, package
        self._mods: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        if name in self._mods:
            return self._mods[name]
        mod = None
        parts = name.split(".")
        if parts[0] == self.package:
            base = self.root.joinpath(*parts[1:])
            for path in (base.with_suffix(".py"), base / "__init__.py"):
                if path.is_file():
                    mod = self._parse(name, path)
                    break
        self._mods[name] = mod
        return mod

    def _parse(self, name: str, path: Path) -> Module | None:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None
        defs: dict[str, ast.AST] = {}
        imports: dict[str, tuple[str, str | None]] = {}
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = _absolute(name, node.module, node.level, is_pkg)
                for a in node.names:
                    imports[a.asname or a.name] = (src, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    imports[a.asname or a.name.split(".")[0]] = (a.name, None)
        aliases: dict[str, str] = {}
        for node in _module_level(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defs[node.name] = node
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Name)):
                aliases[node.targets[0].id] = node.value.id
        for alias, name in aliases.items():
            if name in defs:
                defs[alias] = defs[name]
            elif name in imports:
                imports[alias] = imports[name]
        rel = "/".join([self.package, *path.relative_to(self.root).parts])
        return Module(name, path, rel, tree, defs, imports)

    def resolve(self, mod: Module, name: str, depth: int = 0) -> tuple[Module, ast.AST] | None:
        """The definition ``name`` refers to in ``mod`` (through imports and re-exports)."""
        if name in mod.defs:
            return mod, mod.defs[name]
        if name in mod.imports and depth < 5:
            src, orig = mod.imports[name]
            other = self.module(src)
            if other is not None and orig is not None:
                return self.resolve(other, orig, depth + 1)
        return None

    def module_alias(self, mod: Module, name: str) -> Module | None:
        """The module a local name stands for (``from x import y`` where y is a module)."""
        if name not in mod.imports:
            return None
        src, orig = mod.imports[name]
        return self.module(src if orig is None else f"{src}.{orig}")

    def find_class(self, module: str, cls: str) -> tuple[Module, ast.ClassDef] | None:
        mod = self.module(module)
        if mod is None:
            return None
        found = self.resolve(mod, cls)
        if found is None or not isinstance(found[1], ast.ClassDef):
            return None
        return found[0], found[1]


def _module_level(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, into ``if``/``try`` blocks; under ``if TYPE_CHECKING`` only the
    ``else`` (what runs)."""
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                yield from _module_level(node.orelse)
            else:
                yield from _module_level(node.body)
                yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body)
            for h in node.handlers:
                yield from _module_level(h.body)
        else:
            yield node


def _absolute(current: str, module: str | None, level: int, is_pkg: bool) -> str:
    if level == 0:
        return module or ""
    parts = current.split(".")
    base = parts if is_pkg else parts[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([module] if module else [])])


# -- the walk -------------------------------------------------------------------------------------

@dataclass
class Found:
    reads: list[Read] = field(default_factory=list)
    tensors: list[TensorRule] = field(default_factory=list)
    files: set[Path] = field(default_factory=set)
    rels: dict[Path, str] = field(default_factory=dict)

    def merge_keys(self) -> list[str]:
        return sorted({r.key for r in self.reads})


class Walker:
    """Walks functions and classes of a ``SourceIndex`` from entry points, collecting reads."""

    def __init__(self, index: SourceIndex, seeds: Seeds) -> None:
        self.index, self.seeds = index, seeds
        self.found = Found()
        self._seen: set[tuple[int, tuple[Any, ...]]] = set()
        self._walks: dict[int, int] = {}
        self._classes_done: set[int] = set()

    # entry points -------------------------------------------------------------------------------

    def function(self, mod: Module, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                 args: dict[str, Any] | None = None, owner: str | None = None,
                 self_val: Inst | None = None, depth: int = 0) -> list[Any]:
        """Walk ``fn`` with parameters bound from ``args`` (unbound ones named as seeds start a
        config); the values it may return."""
        env: dict[str, Any] = {}
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
        for p, d in _defaults(fn).items():
            if isinstance(d, ast.Name):
                found = self.index.resolve(mod, d.id)
                if found is not None:
                    env[p] = Ref(found[0], found[1])
        for p in params:
            if args and p in args:
                env[p] = args[p]
            elif p in self.seeds.names:
                env[p] = Cfg("")
        if self_val is not None:
            env["self"] = self_val
        key = (id(fn), _signature(env))
        walks = self._walks.get(id(fn), 0)
        if key in self._seen or depth > MAX_DEPTH or walks >= MAX_WALKS:
            return []
        self._seen.add(key)
        self._walks[id(fn)] = walks + 1
        self.found.files.add(mod.path)
        self.found.rels[mod.path] = mod.rel
        frame = _Frame(self, mod, fn, owner, env, depth)
        frame.block(fn.body)
        return frame.returns

    def instantiate(self, mod: Module, cls: ast.ClassDef, args: dict[str, Any] | None = None,
                    depth: int = 0, inst: Inst | None = None) -> Inst:
        """Build ``cls``: its ``__init__`` with ``args``, then every other method of it and its
        indexed bases (they may run on the instance)."""
        inst = inst or Inst(cls.name)
        init = _method(cls, "__init__")
        if init is not None:
            self.function(mod, init, args, cls.name, inst, depth + 1)
        for base_mod, base in self.bases(mod, cls):
            if init is None:
                self.instantiate(base_mod, base, args, depth + 1, inst)
            else:   # the base's __init__ runs only where this one calls it (super())
                self._methods(base_mod, base, inst, depth)
        self._methods(mod, cls, inst, depth)
        return inst

    def _methods(self, mod: Module, cls: ast.ClassDef, inst: Inst, depth: int,
                 skip_init: bool = True) -> None:
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if skip_init and node.name == "__init__":
                    continue
                self.function(mod, node, None, cls.name, inst, depth + 1)

    def bases(self, mod: Module, cls: ast.ClassDef) -> list[tuple[Module, ast.ClassDef]]:
        out = []
        for b in cls.bases:
            name = b.id if isinstance(b, ast.Name) else None
            if name is None:
                continue
            found = self.index.resolve(mod, name)
            if found is not None and isinstance(found[1], ast.ClassDef):
                out.append((found[0], found[1]))
        return out


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _signature(env: dict[str, Any]) -> tuple[Any, ...]:
    """What a walk of a function depends on: the config values and literals it is given,
    directly or as attributes of an object (a second walk with the same ones finds nothing
    new)."""
    out = []
    for name, v in env.items():
        if isinstance(v, Cfg):
            out.append((name, "cfg", v.path))
        elif isinstance(v, Lit):
            out.append((name, "lit", repr(v.value)))
        elif isinstance(v, Inst):
            out += [(f"{name}.{a}", "cfg", x.path) for a, x in v.attrs.items()
                    if isinstance(x, Cfg)]
    return tuple(sorted(out))


def _chain(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Frame:
    """One function being walked: its environment, its returns, the conditions around."""

    def __init__(self, w: Walker, mod: Module, fn: ast.AST, owner: str | None,
                 env: dict[str, Any], depth: int) -> None:
        self.w, self.mod, self.fn, self.owner, self.env, self.depth = w, mod, fn, owner, env, depth
        self.returns: list[Any] = []
        self.conds: list[tuple[Any, bool]] = []   # (value of the if's test, negated)
        self.loading = getattr(fn, "name", "") == "load_weights"

    def where(self, node: ast.AST) -> str:
        name = getattr(self.fn, "name", "?")
        qual = f"{self.owner}.{name}" if self.owner else name
        return f"{self.mod.rel}:{getattr(node, 'lineno', 0)} ({qual})"

    def read(self, node: ast.AST, cfg: Cfg, key: str, how: str, default: ast.AST | None = None
             ) -> Cfg:
        value = cfg.key(key, _default(default, self))
        self.w.found.reads.append(Read(value.path, how, self.where(node),
                                       ast.unparse(default) if default is not None else None))
        return value

    # statements ---------------------------------------------------------------------------------

    def block(self, body: Iterable[ast.stmt]) -> None:
        for st in body:
            self.stmt(st)

    def stmt(self, st: ast.stmt) -> None:
        if isinstance(st, ast.Assign):
            if self.loading and isinstance(st.value, ast.Dict):   # {"mask_hidden": None}
                for k, v in zip(st.value.keys, st.value.values):
                    if (isinstance(k, ast.Constant) and isinstance(k.value, str)
                            and isinstance(v, ast.Constant) and v.value is None):
                        self._mapped_away(k.value, st)
            value = self.ev(st.value)
            for t in st.targets:
                self.assign(t, value, st)
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            self.assign(st.target, self.ev(st.value), st)
        elif isinstance(st, ast.AugAssign):
            self.ev(st.value)
        elif isinstance(st, ast.Expr):
            self.ev(st.value)
        elif isinstance(st, ast.Return):
            if st.value is not None:
                self.returns.append(self.ev(st.value))
        elif isinstance(st, ast.If):
            self._if(st)
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            it = self.ev(st.iter)
            if isinstance(st.target, ast.Name):
                self.env[st.target.id] = it if isinstance(it, Cfg) else None
            self.block(st.body)
            self.block(st.orelse)
        elif isinstance(st, ast.While):
            self.ev(st.test)
            self.block(st.body)
            self.block(st.orelse)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                self.ev(item.context_expr)
            self.block(st.body)
        elif isinstance(st, ast.Try):
            self.block(st.body)
            for h in st.handlers:
                self.block(h.body)
            self.block(st.orelse)
            self.block(st.finalbody)
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.w.function(self.mod, st, dict(self.env), self.owner,
                            self.env.get("self") if isinstance(self.env.get("self"), Inst)
                            else None, self.depth + 1)
        elif isinstance(st, ast.Assert):
            self.ev(st.test)

    def _if(self, st: ast.If) -> None:
        test = self.ev(st.test)
        negated = isinstance(st.test, ast.UnaryOp) and isinstance(st.test.op, ast.Not)
        if self.loading:
            self._skip_rule(st)
        self.conds.append((test, negated))
        self.block(st.body)
        self.conds.pop()
        self.conds.append((test, not negated))
        self.block(st.orelse)
        self.conds.pop()

    def _skip_rule(self, st: ast.If) -> None:
        """``if "x" in name: continue`` in load_weights: tensors named x are skipped."""
        t = st.test
        if (isinstance(t, ast.Compare) and isinstance(t.left, ast.Constant)
                and isinstance(t.left.value, str) and len(t.ops) == 1
                and isinstance(t.ops[0], ast.In) and st.body
                and isinstance(st.body[-1], ast.Continue)):
            self.w.found.tensors.append(TensorRule(t.left.value, self.where(st)))

    def assign(self, target: ast.AST, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            old = self.env.get(target.id)
            self.env[target.id] = _keep(old, value)
        elif isinstance(target, ast.Attribute):
            owner = self.ev(target.value)
            if isinstance(owner, Inst):
                owner.attrs[target.attr] = _keep(owner.attrs.get(target.attr), value)
            elif isinstance(owner, Cfg):
                self.w.found.reads.append(Read(owner.key(target.attr).path, "set",
                                               self.where(node), _src(node)))
        elif isinstance(target, ast.Subscript):
            owner = self.ev(target.value)
            key = self.ev(target.slice)
            if isinstance(owner, Cfg) and isinstance(key, Lit) and isinstance(key.value, str):
                self.w.found.reads.append(Read(owner.key(key.value).path, "set",
                                               self.where(node), _src(node)))
            elif (self.loading and isinstance(key, Lit) and isinstance(key.value, str)
                  and isinstance(value, Lit) and value.value is None):
                self._mapped_away(key.value, node)
        elif isinstance(target, ast.Tuple):
            for elt in target.elts:
                if isinstance(elt, ast.Name):
                    self.env[elt.id] = None

    def _mapped_away(self, pattern: str, node: ast.AST) -> None:
        """``mapping[pattern] = None`` in load_weights: tensors renamed to nothing."""
        for test, negated in reversed(self.conds):
            if isinstance(test, Cfg):
                # the mapping runs when the test is false (``if not flag``): kept when true
                self.w.found.tensors.append(TensorRule(pattern, self.where(node), test,
                                                       keep_when=negated))
                return
        on_ckpt = bool(self.conds)
        self.w.found.tensors.append(TensorRule(pattern, self.where(node), on_checkpoint=on_ckpt))

    # expressions --------------------------------------------------------------------------------

    def ev(self, node: ast.AST | None) -> Any:
        if node is None:
            return None
        m = getattr(self, "_" + type(node).__name__, None)
        if m is not None:
            return m(node)
        for child in ast.iter_child_nodes(node):
            self.ev(child)
        return None

    def _Constant(self, node: ast.Constant) -> Any:
        return Lit(node.value)

    def _Name(self, node: ast.Name) -> Any:
        return self.env.get(node.id)

    def _Attribute(self, node: ast.Attribute) -> Any:
        chain = _chain(node)
        if chain is not None and any(chain == c or chain.endswith("." + c)
                                     for c in self.w.seeds.chains):
            return Cfg("")
        owner = self.ev(node.value)
        if isinstance(owner, Cfg):
            if node.attr in MAPPING_METHODS:
                return None
            return self.read(node, owner, node.attr, "attribute")
        if isinstance(owner, Inst):
            return owner.attrs.get(node.attr)
        return None

    def _Subscript(self, node: ast.Subscript) -> Any:
        owner = self.ev(node.value)
        key = self.ev(node.slice)
        if isinstance(owner, Cfg) and isinstance(key, Lit):
            if isinstance(key.value, str):
                return self.read(node, owner, key.value, "subscript")
            return owner   # an element of a list-valued key
        return None

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.ev(v) for v in node.values]
        if isinstance(node.op, ast.Or):
            first = next((v for v in values if isinstance(v, Cfg)), None)
            if first is not None and first.default is None:
                rest = next((v for v in values[values.index(first) + 1:] if v is not None), None)
                return Cfg(first.path, rest)
            return first or next((v for v in values if v is not None), None)
        return next((v for v in values if isinstance(v, Cfg)), None)

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return self.ev(node.operand)

    def _IfExp(self, node: ast.IfExp) -> Any:
        self.ev(node.test)
        a, b = self.ev(node.body), self.ev(node.orelse)
        return a if isinstance(a, Cfg) else b if isinstance(b, Cfg) else a or b

    def _Compare(self, node: ast.Compare) -> Any:
        n0 = len(self.w.found.reads)
        left = self.ev(node.left)
        rights = [self.ev(c) for c in node.comparators]
        if (isinstance(left, Lit) and isinstance(left.value, str) and len(node.ops) == 1
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and isinstance(rights[0], Cfg)):
            self.read(node, rights[0], left.value, "in")
            return None
        literal = all(isinstance(c, ast.Constant) or (isinstance(c, (ast.Tuple, ast.List, ast.Set))
                      and all(isinstance(e, ast.Constant) for e in c.elts))
                      for c in node.comparators)
        if isinstance(left, Cfg) and literal and not any(
                isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops):
            reads = self.w.found.reads
            for i in range(n0, len(reads)):
                if reads[i].key == left.path:
                    reads[i] = Read(**{**reads[i].__dict__, "selector": True})
        return None

    def _Call(self, node: ast.Call) -> Any:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else None
        if name in ("getattr", "hasattr") and len(node.args) >= 2:
            owner, key = self.ev(node.args[0]), self.ev(node.args[1])
            default = node.args[2] if len(node.args) > 2 else None
            if default is not None:
                self.ev(default)
            if isinstance(owner, Cfg) and isinstance(key, Lit) and isinstance(key.value, str):
                return self.read(node, owner, key.value, name, default)
            if isinstance(owner, Inst) and isinstance(key, Lit):
                return owner.attrs.get(key.value)
            return None
        if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault", "update"):
            owner = self.ev(f.value)
            if isinstance(owner, Cfg):
                return self._mapping_call(node, owner, f.attr)
        if name in NORMALISERS and len(node.args) == 1:
            n0 = len(self.w.found.reads)
            v = self.ev(node.args[0])
            if isinstance(v, Cfg):
                self._normalised(n0, v, f"{name}()")
            return v
        args = [self.ev(a) for a in node.args]
        kwargs = {k.arg: self.ev(k.value) for k in node.keywords if k.arg}
        for k in node.keywords:
            if k.arg is None:
                self.ev(k.value)
        target = self._callee(f)
        if target is None:
            if isinstance(f, ast.Attribute):
                self.ev(f.value)
            return None
        mod, defn, bound_self = target
        if isinstance(defn, ast.ClassDef):
            init = _class_init(self.w, mod, defn)
            binding = _bind(init, args, kwargs, skip_self=True) if init is not None else kwargs
            return self.w.instantiate(mod, defn, binding, self.depth + 1)
        binding = _bind(defn, args, kwargs, skip_self=bound_self is not None)
        rets = self.w.function(mod, defn, binding, _owner_of(defn, mod),
                               bound_self, self.depth + 1)
        return next((r for r in rets if isinstance(r, (Cfg, Inst))), None)

    def _mapping_call(self, node: ast.Call, owner: Cfg, method: str) -> Any:
        if method == "update":
            for a in node.args:
                if isinstance(a, ast.Dict):
                    for k, v in zip(a.keys, a.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            self.w.found.reads.append(Read(owner.key(k.value).path, "set",
                                                           self.where(node), ast.unparse(v)))
                else:
                    self.ev(a)
            return None
        key = self.ev(node.args[0]) if node.args else None
        default = node.args[1] if len(node.args) > 1 else None
        if default is not None:
            self.ev(default)
        if isinstance(key, Lit) and isinstance(key.value, str):
            return self.read(node, owner, key.value, "get", default)
        return None

    def _normalised(self, n0: int, v: Cfg, how: str) -> None:
        reads = self.w.found.reads
        for i in range(len(reads) - 1, n0 - 1, -1):
            if reads[i].key == v.path:
                old = reads[i].normalise
                reads[i] = Read(**{**reads[i].__dict__,
                                   "normalise": f"{how} of {old}" if old else how})
                return

    def _ListComp(self, node: ast.ListComp) -> Any:
        gen = node.generators[0]
        n0 = len(self.w.found.reads)
        it = self.ev(gen.iter)
        elt = node.elt
        if (isinstance(it, Cfg) and isinstance(elt, ast.BinOp)
                and isinstance(elt.left, ast.Name) and isinstance(gen.target, ast.Name)
                and elt.left.id == gen.target.id and isinstance(elt.right, ast.Constant)):
            op = "+" if isinstance(elt.op, ast.Add) else "-" if isinstance(elt.op, ast.Sub) else "?"
            self._normalised(n0, it, f"each {op} {elt.right.value}")
            return it
        for g in node.generators:
            if isinstance(g.target, ast.Name):
                self.env[g.target.id] = None
            for cond in g.ifs:
                self.ev(cond)
        self.ev(elt)
        return None

    _GeneratorExp = _SetComp = _ListComp

    def _NamedExpr(self, node: ast.NamedExpr) -> Any:
        value = self.ev(node.value)
        self.assign(node.target, value, node)
        return value

    def _Lambda(self, node: ast.Lambda) -> Any:
        for a in node.args.args:
            self.env.setdefault(a.arg, None)
        self.ev(node.body)
        return None

    def _callee(self, f: ast.AST) -> tuple[Module, ast.AST, Inst | None] | None:
        """(module, definition, bound instance) of a call's function, where indexed."""
        if isinstance(f, ast.Name):
            held = self.env.get(f.id)
            if isinstance(held, Ref):
                return held.mod, held.defn, None
            found = self.w.index.resolve(self.mod, f.id)
            return (found[0], found[1], None) if found is not None else None
        if not isinstance(f, ast.Attribute):
            return None
        if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
                and f.value.func.id == "super" and self.owner:
            cls = self.w.index.resolve(self.mod, self.owner)
            me = self.env.get("self")
            if cls is not None and isinstance(cls[1], ast.ClassDef):
                for bmod, base in self.w.bases(cls[0], cls[1]):
                    m = _find_method(self.w, bmod, base, f.attr)
                    if m is not None:
                        return m[0], m[1], me if isinstance(me, Inst) else None
            return None
        if isinstance(f.value, ast.Name):
            if f.value.id == "self" and self.owner:
                cls = self.w.index.resolve(self.mod, self.owner)
                me = self.env.get("self")
                if cls is not None and isinstance(cls[1], ast.ClassDef):
                    m = _find_method(self.w, cls[0], cls[1], f.attr)
                    if m is not None:
                        return m[0], m[1], me if isinstance(me, Inst) else None
                    held = _class_attr(self.w, cls[0], cls[1], f.attr)
                    if held is not None:
                        return held[0], held[1], None
                return None
            alias = self.w.index.module_alias(self.mod, f.value.id)
            if alias is not None and f.attr in alias.defs:
                return alias, alias.defs[f.attr], None
        return None


def _defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.AST]:
    pos = [*fn.args.posonlyargs, *fn.args.args]
    out = {a.arg: d for a, d in zip(pos[len(pos) - len(fn.args.defaults):], fn.args.defaults)}
    out.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
                if d is not None})
    return out


def _find_method(w: Walker, mod: Module, cls: ast.ClassDef, name: str, depth: int = 0
                 ) -> tuple[Module, ast.FunctionDef] | None:
    m = _method(cls, name)
    if m is not None:
        return mod, m
    if depth > 6:
        return None
    for bmod, base in w.bases(mod, cls):
        found = _find_method(w, bmod, base, name, depth + 1)
        if found is not None:
            return found
    return None


def _class_attr(w: Walker, mod: Module, cls: ast.ClassDef, name: str, depth: int = 0
                ) -> tuple[Module, ast.AST] | None:
    """A class-body ``name = SomeClass`` (e.g. ``decoder_layer_cls``), here or in a base."""
    for node in cls.body:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Name)
                and any(isinstance(t, ast.Name) and t.id == name
                        for t in (node.targets if isinstance(node, ast.Assign)
                                  else [node.target]))):
            return w.index.resolve(mod, node.value.id)
    if depth > 6:
        return None
    for bmod, base in w.bases(mod, cls):
        found = _class_attr(w, bmod, base, name, depth + 1)
        if found is not None:
            return found
    return None


def _class_init(w: Walker, mod: Module, cls: ast.ClassDef) -> ast.FunctionDef | None:
    found = _find_method(w, mod, cls, "__init__")
    return found[1] if found is not None else None


def _owner_of(defn: ast.AST, mod: Module) -> str | None:
    for node in mod.tree.body:
        if isinstance(node, ast.ClassDef) and defn in node.body:
            return node.name
    return None


def _bind(fn: ast.FunctionDef, args: list[Any], kwargs: dict[str, Any], skip_self: bool
          ) -> dict[str, Any]:
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if skip_self and params and params[0] in ("self", "cls"):
        params = params[1:]
    out = {p: v for p, v in zip(params, args) if v is not None}
    names = set(params) | {a.arg for a in fn.args.kwonlyargs}
    out.update({k: v for k, v in kwargs.items() if k in names and v is not None})
    return out


def _keep(old: Any, new: Any) -> Any:
    """Both branches of an if assign: a config value is kept over a plain one (the name then
    depends on the config), with the plain one as its default."""
    if isinstance(old, Cfg) and not isinstance(new, (Cfg, Inst)):
        return Cfg(old.path, old.default if old.default is not None else new)
    return new


def _default(node: ast.AST | None, frame: _Frame) -> Any:
    if node is None:
        return None
    try:
        return Lit(ast.literal_eval(node))
    except (ValueError, SyntaxError, TypeError):
        v = frame.ev(node)
        return v if isinstance(v, (Cfg, Lit)) else None


def _src(node: ast.AST) -> str:
    value = getattr(node, "value", None)
    return ast.unparse(value) if isinstance(value, ast.AST) else ast.unparse(node)


def literal_default(read: Read) -> tuple[bool, Any]:
    """(True, value) when the read's default is a literal; (False, None) otherwise."""
    if read.default is None:
        return (True, None) if read.how == "get" else (False, None)   # dict.get's own default
    try:
        return True, ast.literal_eval(read.default)
    except (ValueError, SyntaxError):
        return False, None
