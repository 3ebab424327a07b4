"""The library owns its defaults; the CLI reads them and never restates them.

Read from the source (ast): no option or argument under cli/ is declared with a literal
default (a number, a non-empty string or a non-empty list). A default the CLI writes as a
literal drifts from the one the library uses when it is called without the option; the CLI
takes it from the library instead (``default=ReadOptions.drafter``, ``default=QUERIES``, …).
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "specdoctor" / "cli"
DECLARERS = {"option", "argument", "list_option", "out_option", "ready_timeout_option",
             "env_option"}
NO_VALUE = (None, True, False)


def literal_defaults(source: str, name: str = "x.py") -> list[str]:
    """``file:line --flag = value`` for each option declared with a literal default."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) not in DECLARERS:
            continue
        for kw in node.keywords:
            if kw.arg not in ("default", "show_default"):
                continue
            v = kw.value
            literal = ((isinstance(v, ast.Constant) and v.value not in NO_VALUE and v.value != "")
                       or (isinstance(v, (ast.Tuple, ast.List)) and v.elts))
            if literal and not (kw.arg == "show_default" and isinstance(v, ast.Constant)
                                and isinstance(v.value, bool)):
                flag = ast.unparse(node.args[0]) if node.args else "?"
                out.append(f"{name}:{node.lineno} {flag} {kw.arg}={ast.unparse(v)}")
    return out


def test_no_cli_option_states_a_default_of_its_own():
    found = [x for p in sorted(CLI.glob("*.py")) for x in literal_defaults(p.read_text(), p.name)]
    assert not found, "take these defaults from the library:\n" + "\n".join(found)


def test_the_check_sees_a_restated_default():
    src = ('@click.option("--windows", type=int, default=20)\n'
           '@list_option("--pick", default=("vllm",), show_default="vllm")\n'
           '@click.option("--q", default=QUERIES, show_default=True)\n'
           '@click.option("--db", default=None)\n'
           'def f(): pass\n')
    assert literal_defaults(src) == [
        "x.py:1 '--windows' default=20",
        "x.py:2 '--pick' default=('vllm',)",
        "x.py:2 '--pick' show_default='vllm'",
    ]
