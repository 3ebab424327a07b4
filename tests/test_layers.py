"""The layers of specdoctor point one way, read from the source (ast; nothing is imported).

The path of one diagnosis is the layout (docs/experiments-layout.md):

    cli → diagnose → experiments → oracle / bench / sources / report → acceptance

A package may import packages of its own layer or below, never above; launch, recon, packs,
store (and the errors, paths, methods and textfile modules) sit beside the layers: anyone may
use them, and they use only each other. The lab is a patient: it sits beside experiments, the
diagnosis never imports it and it never imports an experiment. Lazy imports inside functions
count as much as imports at the top of a module, and no two packages may import each other,
however indirectly. The oracle reads neither the store nor the bench (the command hands it the
recorded run and the prompts), and a report renders what it is handed (the command reads the
store).

Inside a package the same holds file by file: no two modules import each other, however
indirectly, counting imports inside functions and under ``TYPE_CHECKING`` — the one exception
is a package's ``__init__`` facade and its own modules (the facade re-exports them, they may
import names from it). Readers several experiments share live below them (``served_files``,
``experiments.common``), not in one experiment borrowed by another.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "specdoctor"

LAYERS: dict[str, int] = {
    "__main__": 7, "cli": 6, "diagnose": 5, "experiments": 4, "lab": 4, "gate": 4,
    # the verdict core: below both wings of a diagnosis, which share it
    "verdict": 3, "oracle": 2, "bench": 2, "sources": 2, "report": 2, "acceptance": 1,
}
BESIDE = frozenset({"launch", "recon", "packs", "store", "errors", "paths", "methods", "textfile",
                    "safe_text", "gguf_files",
                    "served_files", "__init__"})
FORBIDDEN = {("experiments", "diagnose"), ("oracle", "store"), ("lab", "experiments"),
             ("diagnose", "lab"), ("experiments", "lab"), ("oracle", "bench"),
             ("report", "store")}
# Edges known to be wrong and waiting for their fix; an entry that no longer occurs fails, so
# none outstays its reason.
PENDING: set[tuple[str, str]] = set()
# Module cycles known and waiting for their fix, with the fix; an entry that no longer occurs
# fails, so none outstays its reason.
PENDING_CYCLES: dict[frozenset[str], str] = {}


def _package(path: Path, root: Path = SRC) -> str:
    """``cli`` for src/specdoctor/cli/x.py; ``errors`` for src/specdoctor/errors.py."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _targets(node: ast.AST) -> list[str]:
    """The specdoctor packages an import statement reaches."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "specdoctor":   # from specdoctor import oracle
            names = [f"specdoctor.{a.name}" for a in node.names]
        else:
            names = [node.module]
    else:
        return []
    return [n.split(".")[1] for n in names if n.startswith("specdoctor.")]


def import_graph(root: Path = SRC) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) → the files where it happens."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        src = _package(path, root)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for dst in _targets(node):
                if dst != src and dst != "__version__":
                    edges[(src, dst)].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return dict(edges)


def violations(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    out = []
    for (src, dst), where in sorted(edges.items()):
        why = None
        if (src, dst) in FORBIDDEN:
            why = "forbidden"
        elif src in BESIDE and dst not in BESIDE:
            why = f"{src} sits beside the layers and may use only launch, recon, packs, store"
        elif src not in BESIDE and src not in LAYERS:
            why = f"{src} is in no layer: add it to LAYERS or BESIDE"
        elif dst in LAYERS and src in LAYERS and LAYERS[dst] > LAYERS[src]:
            why = f"upward: {src} (layer {LAYERS[src]}) imports {dst} (layer {LAYERS[dst]})"
        if why:
            out.append(f"{src} → {dst} ({why}): {', '.join(where[:3])}")
    return out


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Groups of packages that import each other (strongly connected, more than one)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        graph[src].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(set(graph) | {d for _, d in edges}):
        if v not in index:
            visit(v)
    return out


# -- file by file -----------------------------------------------------------------------------

def _modules(root: Path) -> tuple[dict[str, Path], set[str]]:
    """Dotted module name (below specdoctor) → file, and the names that are packages."""
    mods: dict[str, Path] = {}
    packages: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            packages.add(".".join(parts))
        mods[".".join(parts)] = path
    return mods, packages


def _module_targets(node: ast.AST, mods: dict[str, Path]) -> list[str]:
    """The specdoctor modules an import statement reaches: ``from specdoctor.a import b`` is
    module ``a.b`` when b is a module, else ``a`` (b is a name defined or re-exported there)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [f"{node.module}.{a.name}" for a in node.names]
    else:
        return []
    out = []
    for name in names:
        if not name.startswith("specdoctor."):
            continue
        dotted = name.removeprefix("specdoctor.")
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        if dotted:
            out.append(dotted)
    return out


def _facade(src: str, dst: str, packages: set[str]) -> bool:
    """An edge between a package's ``__init__`` and one of its own modules."""
    return ((dst in packages and src.startswith(dst + "."))
            or (src in packages and dst.startswith(src + ".")))


def module_graph(root: Path = SRC) -> dict[tuple[str, str], list[str]]:
    """(importing module, imported module) → where, for every import in every function and
    ``TYPE_CHECKING`` block too; edges between a package facade and its own modules left out."""
    mods, packages = _modules(root)
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for src, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for dst in _module_targets(node, mods):
                if dst != src and not _facade(src, dst, packages):
                    edges[(src, dst)].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return dict(edges)


def test_every_package_has_a_place():
    packages = {_package(p) for p in SRC.rglob("*.py")}
    assert packages <= set(LAYERS) | BESIDE, packages - set(LAYERS) - BESIDE


def test_no_import_points_up_or_crosses_a_forbidden_line():
    edges = import_graph()
    assert violations({e: w for e, w in edges.items() if e not in PENDING}) == []
    assert PENDING <= set(edges), f"no longer imported, drop from PENDING: {PENDING - set(edges)}"


def test_no_two_packages_import_each_other():
    assert cycles(import_graph()) == []


def _show(group: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    inside = [f"{a} → {b} ({edges[(a, b)][0]})" for a in group for b in group if (a, b) in edges]
    return "; ".join(inside)


def test_no_two_modules_import_each_other():
    edges = module_graph()
    found = {frozenset(g): g for g in cycles(edges)}
    new = [_show(g, edges) for key, g in found.items() if key not in PENDING_CYCLES]
    assert new == [], "module cycles (move what both need below them):\n" + "\n".join(new)
    gone = [sorted(key) for key in PENDING_CYCLES if key not in found]
    assert gone == [], f"no longer a cycle, drop from PENDING_CYCLES: {gone}"


def test_the_checks_see_what_they_must(tmp_path):
    """The graph reader on a tree with each kind of fault: a lazy upward import, a forbidden
    pair, a tool that climbs into a layer, and a cycle."""
    pkg = tmp_path / "specdoctor"
    files = {
        "experiments/x.py": "def f():\n    from specdoctor.diagnose import ledger\n",
        "oracle/y.py": "from specdoctor.store import db\n",
        "launch/z.py": "import specdoctor.bench.measure\n",
        "bench/a.py": "from specdoctor import sources\n",
        "sources/b.py": "from specdoctor.bench import a\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    edges = import_graph(pkg)
    found = violations(edges)
    assert any(v.startswith("experiments → diagnose (forbidden)") and "x.py:2" in v
               for v in found), found
    assert any(v.startswith("oracle → store (forbidden)") for v in found)
    assert any(v.startswith("launch → bench (launch sits beside") for v in found)
    assert cycles(edges) == [["bench", "sources"]]


def test_the_module_check_sees_lazy_and_type_checking_cycles_and_spares_facades(tmp_path):
    """A cycle closed by an import inside a function, one closed under ``TYPE_CHECKING``, and a
    package facade that re-exports its module which imports a name from it (no cycle)."""
    pkg = tmp_path / "specdoctor"
    files = {
        "experiments/__init__.py": "",
        "experiments/a.py": "def f():\n    from specdoctor.experiments.b import g\n",
        "experiments/b.py": "from specdoctor.experiments import a\n",
        "experiments/c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             "    from specdoctor.experiments.d import D\n"),
        "experiments/d.py": "from specdoctor.experiments.c import C\n",
        "launch/__init__.py": "from specdoctor.launch.spec import LaunchSpec\n",
        "launch/spec.py": "from specdoctor.launch import free_port\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    edges = module_graph(pkg)
    assert ("experiments.a", "experiments.b") in edges
    assert edges[("experiments.c", "experiments.d")] == ["specdoctor/experiments/c.py:3"]
    assert cycles(edges) == [["experiments.a", "experiments.b"],
                             ["experiments.c", "experiments.d"]]
