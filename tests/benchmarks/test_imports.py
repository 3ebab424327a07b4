"""Every specdoctor name a benchmark script imports exists (read with ast; nothing is run).

Benchmarks run by hand, not in CI, so a module moved or a name renamed in the package would
otherwise only show when someone next runs the script.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module, name imported from it or None, line) for every specdoctor import."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names
                    if a.name.split(".")[0] == "specdoctor"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "specdoctor":
            out += [(node.module, a.name, node.lineno) for a in node.names]
    return out


@pytest.mark.parametrize("path", sorted(BENCHMARKS.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(BENCHMARKS)))
def test_every_specdoctor_import_resolves(path: Path) -> None:
    missing = []
    for module, name, line in _imports(path):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] != "specdoctor":
                continue   # a heavy optional dependency (torch, vllm) absent here
            missing.append(f"line {line}: {module} ({exc})")
            continue
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"line {line}: {module} has no {name}")
    assert not missing, "\n".join(missing)
