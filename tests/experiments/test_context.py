"""The context experiments share is typed: every ``ctx.<name>`` the diagnosis and the
experiments read or write is a declared field of ``Context`` (read from the source with ast), so
a misspelt or undeclared key fails here instead of reading None at run time."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from specdoctor.experiments.base import Context

SRC = Path(__file__).resolve().parents[2] / "src" / "specdoctor"


def ctx_names(root: Path) -> dict[str, list[str]]:
    """Attribute names used on a variable called ``ctx`` (or ``few``, a narrowed copy)."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("ctx", "few"):
                out.setdefault(node.attr, []).append(f"{path.name}:{node.lineno}")
    return out


def test_every_name_read_on_the_context_is_a_field():
    fields = {f.name for f in dataclasses.fields(Context)}
    used = {**ctx_names(SRC / "experiments"), **ctx_names(SRC / "diagnose")}
    unknown = {name: where[:3] for name, where in used.items() if name not in fields}
    assert unknown == {}
    assert "data" not in fields   # no bag of string keys beside the fields


def test_the_reader_sees_an_undeclared_name(tmp_path):
    (tmp_path / "x.py").write_text("def f(ctx):\n    return ctx.olacle_gap\n")
    assert ctx_names(tmp_path) == {"olacle_gap": ["x.py:2"]}
