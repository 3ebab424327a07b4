"""Collect the commands and flags that specdoctor's text tells a user to type.

Three kinds of hint, each kept with the file and line it comes from:

- a command line: `specdoctor WORDS [--flags]` in a code span or code block of README.md and
  docs/*.md, or in a Python string where it reads as an instruction (at the start, or after
  `:`, a backtick, `(`, `run`, `with` or `try`); prose such as "specdoctor reads" is not one;
- a code span whose first word is a command (`masks diff`, `lab up --help`), in Markdown or in
  a Python string;
- a bare flag after an instruction word ("pass --drafter", "no --k") in a Python string: it
  must exist on a command that can reach the module it is written in, or on a command the
  same string names ("a lab server started with --patch").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
WORD = re.compile(r"^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$")
SPAN = re.compile(r"`([^`\n]+)`")
BARE_FLAG = re.compile(r"\b(?:pass|use|add|with|without|omit|raise|set|try|no|give|see|another)"
                       r"\s+(--[a-z][a-z0-9-]*)")
SEGMENT_END = re.compile(r"`| \| | && |;| # | — | -- |\)|, or |\. [A-Z]")
INSTRUCTION_BEFORE = (":", "`", "(", "run", "with", "try", "$", "-m")


@dataclass(frozen=True)
class Hint:
    where: str  # path:line, relative to the repository
    words: tuple[str, ...]  # command words after `specdoctor` (may hold a|b alternatives)
    flags: tuple[str, ...]
    text: str
    module: str | None = None  # for bare flags: the Python module they are written in

    @property
    def bare_flag(self) -> bool:
        return self.module is not None


QUOTED = re.compile(r"'[^']*(?:'|$)|\"[^\"]*(?:\"|$)")


def _command_line(text: str, where: str, commands: set[str]) -> Hint | None:
    """TEXT starts right after `specdoctor` (or at a command word). None when it is prose
    ("specdoctor starts it on a free port") or names its command through a placeholder."""
    text = SEGMENT_END.split(text, maxsplit=1)[0]
    # a quoted argument is another program's command line (`--launch 'vllm serve … --model M'`)
    bare = QUOTED.sub(" ", text)
    tokens = bare.split()
    if tokens and tokens[0] == "X":
        return None  # an f-string placeholder: the command is computed, nothing to check
    if tokens and tokens[0] not in commands and WORD.match(tokens[0]) and len(tokens) > 1 \
            and WORD.match(tokens[1]) and not FLAG.fullmatch(tokens[1]):
        return None  # an unknown word followed by more words reads as prose
    words: list[str] = []
    for t in tokens:
        if FLAG.fullmatch(t) or not WORD.match(t) or len(words) == 3:
            break
        words.append(t)
    return Hint(where, tuple(words), tuple(FLAG.findall(bare)), text.strip())


def _from_code(text: str, where: str, commands: set[str], require_lead: bool) -> Iterator[Hint]:
    """Hints in one piece of code-like text (a code span, a code line, a Python string)."""
    for m in re.finditer(r"(?<![\w/.-])specdoctor(?![\w/.-])", text):
        before = text[:m.start()].rstrip()
        if require_lead and before and not before.endswith(INSTRUCTION_BEFORE):
            continue
        hint = _command_line(text[m.end():], where, commands)
        if hint is not None:
            yield hint
    for span in SPAN.findall(text):
        first = span.split()[0] if span.split() else ""
        if first in commands or first.split("|")[0] in commands:
            hint = _command_line(span, where, commands)
            if hint is not None:
                yield hint


def markdown_hints(path: Path, commands: set[str]) -> Iterator[Hint]:
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        line, n = lines[i], i + 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
            i += 1
            continue
        if fenced or line.startswith("    "):
            while line.endswith("\\") and i + 1 < len(lines):  # shell continuation
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            yield from _from_code(line, f"{rel}:{n}", commands, require_lead=False)
        else:
            for span in SPAN.findall(line):
                yield from _from_code(f"`{span}`", f"{rel}:{n}", commands, require_lead=False)
        i += 1


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):  # f-string: placeholders read as X
            parts = [v.value if isinstance(v, ast.Constant) else "X" for v in node.values]
            yield node.lineno, "".join(str(p) for p in parts)


def python_hints(path: Path, commands: set[str]) -> Iterator[Hint]:
    rel = path.relative_to(ROOT).as_posix()
    module = module_name(path)
    tree = ast.parse(path.read_text())
    seen: set[tuple[int, str]] = set()
    for line, s in _strings(tree):
        if (line, s) in seen:
            continue  # an f-string's constant parts are visited twice
        seen.add((line, s))
        yield from _from_code(s, f"{rel}:{line}", commands, require_lead=True)
        for m in BARE_FLAG.finditer(s):
            if "specdoctor" in s[:m.start()].rsplit("\n", 1)[-1]:
                continue  # a flag of a command line: checked with its command
            named = tuple(c for c in commands if re.search(rf"(?<![\w-]){c}(?![\w-])", s))
            yield Hint(f"{rel}:{line}", named, (m.group(1),), s.strip()[:120], module=module)


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def all_hints(commands: set[str]) -> list[Hint]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    out = [h for d in docs for h in markdown_hints(d, commands)]
    for py in sorted((SRC / "specdoctor").rglob("*.py")):
        out.extend(python_hints(py, commands))
    return out


def imports(path: Path) -> set[str]:
    """specdoctor modules that PATH imports, lazily inside functions too; a module imported by
    a computed name (`import_module(f"specdoctor.sources.{engine}")`) as its prefix + "*"."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and re.fullmatch(r"specdoctor(\.\w+)*\.",
                                                                str(head.value)):
                out.add(f"{head.value}*")
    return {m for m in out if m.startswith("specdoctor.")}


def reach() -> dict[str, set[str]]:
    """For each module, the top-level commands whose code can import it (the static import
    closure of each command's module)."""
    from specdoctor.cli.main import COMMANDS

    files = {module_name(p): p for p in (SRC / "specdoctor").rglob("*.py")}
    out: dict[str, set[str]] = {}
    for cmd, (mod, _, _) in COMMANDS.items():
        todo, seen = [mod], set()
        while todo:
            m = todo.pop()
            if m.endswith("*"):
                todo.extend(n for n in files if n.startswith(m[:-1]))
                continue
            if m in seen or m not in files:
                continue
            seen.add(m)
            todo.extend(imports(files[m]))
        for m in seen:
            out.setdefault(m, set()).add(cmd)
    return out
