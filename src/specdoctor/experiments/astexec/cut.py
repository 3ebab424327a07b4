"""Cut named definitions out of a Python file, with the module-level code they need.

`cut_definitions(path, ["_resolve_layer_attention"])` returns the definition,
the module-level functions, classes and constants it reaches (transitively),
and the names nothing in the file defines: those become stubs. Imports of the
standard library are kept as real imports; every other import becomes a stub,
so the engine itself is never imported.

Names are found with `symtable`, i.e. the compiler's own scoping, including
names that appear only in annotations, decorators, base classes and default
values — all of which Python evaluates when the `def` runs.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import symtable
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from specdoctor.errors import InputError

_BUILTINS = set(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__package__"}


@dataclass(frozen=True)
class Segment:
    """One piece of cut source, at its original line numbers."""

    name: str  # what it defines (function, class, constant or import names)
    kind: str  # requested | dependency | import
    start: int
    end: int
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass
class Cut:
    file: Path
    file_sha256: str
    segments: list[Segment]
    stubs: dict[str, list[str]]  # stub name -> roles (annotation, decorator, base, default, body)
    future_annotations: bool
    requested: list[str] = field(default_factory=list)


def read_source(path: Path) -> tuple[str, bytes]:
    """The file's text, decoded as Python decodes it (UTF-8 or its `coding:` line), and its
    bytes. Binary files and bytes invalid in that encoding are refused with the fix."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", "check the path") from exc
    if b"\0" in raw:
        raise InputError(f"{path} is a binary file (it contains NUL bytes), not Python source",
                         "pass the engine's .py file, or the dotted name of an installed module")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:  # an unknown `coding:` declaration
        raise InputError(f"{path} is not Python source text ({exc.msg})",
                         "pass the engine's .py file, or the dotted name of an installed module"
                         ) from exc
    try:
        return raw.decode(encoding), raw
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not valid {encoding} text (byte {exc.start}: "
                         f"{raw[exc.start:exc.start + 1]!r}), so Python could not run it either",
                         "pass the engine's .py file; a file in another encoding needs its "
                         "`# -*- coding: NAME -*-` line") from exc


def cut_definitions(path: Path, names: list[str]) -> Cut:
    source, raw = read_source(path)
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise InputError(f"{path.name} has a syntax error at line {exc.lineno}: {exc.msg}",
                         "pass a file this Python can parse (check the engine's Python version)") from exc
    lines = source.splitlines(keepends=True)
    index = _ModuleIndex(tree, lines)
    chosen: dict[int, Segment] = {}  # statement index -> segment
    methods: dict[str, list[str]] = {}
    for name in names:
        head, _, method = name.partition(".")
        if method:
            methods.setdefault(head, []).append(method)
            continue
        seg, stmt_i = index.requested(name)
        chosen[stmt_i] = seg
    for cls, wanted in methods.items():
        seg, stmt_i = index.methods(cls, wanted)
        chosen.setdefault(stmt_i, seg)  # a whole class asked for too wins over a reduced one
    pending: list[str] = [n for seg in chosen.values() for n in _free_names(seg.text)]
    stubs: dict[str, list[str]] = {}
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        found = index.binding(name)
        if found is None:
            if name not in _BUILTINS:  # a module may shadow a builtin: its binding wins
                stubs.setdefault(name, [])
            continue
        stmt_i, seg = found
        if seg.kind == "import" and not _is_stdlib_import(index.tree.body[stmt_i]):
            stubs.setdefault(name, [])
            continue
        if stmt_i not in chosen:
            chosen[stmt_i] = seg
            pending.extend(_free_names(seg.text))
    segments = sorted(chosen.values(), key=lambda s: s.start)
    for seg in segments:
        for stub, roles in _roles(seg.text).items():
            if stub in stubs:
                stubs[stub] = sorted(set(stubs[stub]) | roles)
    return Cut(
        file=path,
        file_sha256=hashlib.sha256(raw).hexdigest(),
        segments=segments,
        stubs=dict(sorted(stubs.items())),
        future_annotations=index.future_annotations,
        requested=list(names),
    )


class _ModuleIndex:
    """Top-level statements and the names each binds."""

    def __init__(self, tree: ast.Module, lines: list[str]) -> None:
        self.tree = tree
        self.lines = lines
        self.bindings: dict[str, int] = {}
        self.future_annotations = False
        for i, stmt in enumerate(tree.body):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                self.future_annotations |= any(a.name == "annotations" for a in stmt.names)
                continue
            for name in _bound_names(stmt):
                self.bindings[name] = i  # the last unconditional binding wins, as at run time

    def text(self, stmt: ast.stmt) -> tuple[int, int, str]:
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        end = stmt.end_lineno or stmt.lineno
        return start, end, "".join(self.lines[start - 1:end])

    def binding(self, name: str) -> tuple[int, Segment] | None:
        i = self.bindings.get(name)
        if i is None:
            return None
        stmt = self.tree.body[i]
        start, end, text = self.text(stmt)
        kind = "import" if isinstance(stmt, ast.Import | ast.ImportFrom) else "dependency"
        return i, Segment(name, kind, start, end, text)

    def requested(self, name: str) -> tuple[Segment, int]:
        i = self.bindings.get(name)
        stmt = self.tree.body[i] if i is not None else None
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            raise InputError(f"no function or class {name!r} at the top level of the file",
                             f"defined here: {', '.join(self._defs()) or 'nothing'}")
        start, end, text = self.text(stmt)
        return Segment(name, "requested", start, end, text), i  # type: ignore[return-value]

    def methods(self, cls_name: str, wanted: list[str]) -> tuple[Segment, int]:
        """The class with only its header, simple class attributes and the named methods.

        Dropped members become blank lines, so every kept line keeps its line number
        and tracebacks point into the real file.
        """
        i = self.bindings.get(cls_name)
        cls = self.tree.body[i] if i is not None else None
        if not isinstance(cls, ast.ClassDef):
            raise InputError(f"no class {cls_name!r} at the top level of the file",
                             f"classes here: {', '.join(self._defs(ast.ClassDef)) or 'none'}")
        defs = {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
        for m in wanted:
            if m not in defs:
                raise InputError(f"class {cls_name} has no method {m!r}",
                                 f"its methods: {', '.join(defs) or 'none'}")
        start = min([cls.lineno] + [d.lineno for d in cls.decorator_list])
        end = cls.end_lineno or cls.lineno
        keep = set(range(start, cls.body[0].lineno))  # header, up to the first body statement
        for s in cls.body:
            if isinstance(s, ast.Assign | ast.AnnAssign) or (
                    isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name in wanted):
                s_start, s_end, _ = self.text(s)
                keep.update(range(s_start, s_end + 1))
        text = "".join(self.lines[n - 1] if n in keep else "\n" for n in range(start, end + 1))
        name = f"{cls_name}.{','.join(wanted)}"
        return Segment(name, "requested", start, end, text), i  # type: ignore[return-value]

    def _defs(self, kinds: type | tuple[type, ...] = (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.ClassDef)) -> list[str]:
        return [s.name for s in self.tree.body if isinstance(s, kinds)]  # type: ignore[attr-defined]


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign) and stmt.value is not None:
        targets = [stmt.target]
    names = []
    for t in targets:
        names.extend(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _is_stdlib_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        return stmt.level == 0 and (stmt.module or "").split(".")[0] in sys.stdlib_module_names
    if isinstance(stmt, ast.Import):
        return all(a.name.split(".")[0] in sys.stdlib_module_names for a in stmt.names)
    return False


def _free_names(text: str) -> list[str]:
    """Global names a cut segment reads, by the compiler's own scoping rules."""
    import textwrap

    code = textwrap.dedent(text)
    table = symtable.symtable(code, "<cut>", "exec")
    out: list[str] = []

    def walk(t: symtable.SymbolTable) -> None:
        for sym in t.get_symbols():
            if not sym.is_referenced():
                continue
            if t.get_type() == "module":
                if not (sym.is_assigned() or sym.is_imported()):
                    out.append(sym.get_name())
            elif sym.is_global():
                out.append(sym.get_name())
        for child in t.get_children():
            walk(child)

    walk(table)
    return out


def _roles(text: str) -> dict[str, set[str]]:
    """Where each name occurs in a definition: why a stub was needed."""
    import textwrap

    tree = ast.parse(textwrap.dedent(text))
    roles: dict[str, set[str]] = {}

    def mark(node: ast.AST | None, role: str) -> None:
        if node is None:
            return
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                roles.setdefault(n.id, set()).add(role)

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in node.decorator_list:
                mark(d, "decorator")
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None:
                    mark(arg.annotation, "annotation")
            mark(node.returns, "annotation")
            for default in a.defaults + [d for d in a.kw_defaults if d is not None]:
                mark(default, "default")
            for stmt in node.body:
                mark(stmt, "body")
        elif isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                mark(d, "decorator")
            for b in node.bases + [k.value for k in node.keywords]:
                mark(b, "base")
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation, "annotation")
    # Everything else (class attributes, module constants) runs as plain code.
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id not in roles:
            roles[n.id] = {"body"}
    return roles
