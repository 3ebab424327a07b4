"""Every example command line parses with the real CLI, and every command's help ends with one.

- README.md and docs/*.md: each line of a code block (fenced or indented) that starts with
  `specdoctor ` or `python3 -m specdoctor ` (a `$ ` prompt allowed, `\\` continuations joined) is
  parsed by click exactly as the command would parse it: options, types, choices, list grammar
  and callbacks, without running the command.
- `--help` of every command ends with an "Example:" paragraph (after the options) whose lines
  parse the same way.
"""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import click
import pytest

from specdoctor.cli.main import cli
from tests.cli.clitree import commands

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LEAD = re.compile(r"^(?:\$ )?(?:python3 -m )?specdoctor(?: |$)")
# Where one shell command ends and the next (or a redirection, or a comment) begins.
SHELL_END = re.compile(r"\s(?:&&|\|\||\||;|#|2>&1|>|<)(?:\s|$)")


def example_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, command line) of the specdoctor command lines in PAGE's code blocks."""
    out: list[tuple[int, str]] = []
    lines = page.read_text().splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        line, n = lines[i], i + 1
        i += 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            continue
        text = line.strip()
        while text.endswith("\\") and i < len(lines):
            text = text[:-1] + " " + lines[i].strip()
            i += 1
        if LEAD.match(text):
            out.append((n, text))
    return out


def argv_of(text: str) -> list[str]:
    """The arguments after `specdoctor` up to where the shell command ends."""
    text = LEAD.sub("", text, count=1)
    return shlex.split(SHELL_END.split(f" {text}", maxsplit=1)[0])


@pytest.fixture(autouse=True)
def _paths_need_not_exist(monkeypatch):
    # examples name the reader's files (target/, server.log): their spelling is checked, not
    # whether they exist on this machine
    monkeypatch.setattr(click.Path, "convert",
                        lambda self, value, param, ctx: self.coerce_path_result(value))


def parse(args: list[str]) -> click.Context:
    """Parse ARGS as `specdoctor ARGS` would be, down to the leaf command; run nothing."""
    ctx = cli.make_context("specdoctor", list(args))
    while isinstance(ctx.command, click.Group):
        with warnings.catch_warnings():  # click 8.2-8.x: a group keeps its subcommand apart
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*ctx.protected_args, *ctx.args]
        if not rest:
            break
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        ctx = sub.make_context(name, rest, parent=ctx)
    return ctx


def _examples() -> list[tuple[str, str]]:
    return [(f"{p.relative_to(ROOT)}:{n}", text) for p in PAGES for n, text in example_lines(p)]


@pytest.mark.parametrize("where, text", _examples(), ids=lambda v: v if ":" in v else None)
def test_every_example_in_readme_and_docs_parses(where, text):
    try:
        parse(argv_of(text))
    except click.ClickException as exc:
        pytest.fail(f"{where}: `{text}` does not parse: {exc.format_message()}")


def test_the_examples_are_found_and_a_wrong_one_is_refused(tmp_path):
    assert len(_examples()) > 30
    page = tmp_path / "p.md"
    page.write_text("text\n\n    $ specdoctor diagnose --logs a.log,b.log --sampling greedy,official"
                    " --suite code,essay 2>&1 | tee out\n\n```\npython3 -m specdoctor lab up \\\n"
                    "  --method eagle3\n```\n")
    (n1, t1), (n2, t2) = example_lines(page)
    assert (n1, n2) == (3, 6) and argv_of(t2) == ["lab", "up", "--method", "eagle3"]
    ctx = parse(argv_of(t1))  # the README's diagnose row, in the one list grammar
    assert ctx.params["logs"] == (Path("a.log"), Path("b.log"))
    assert ctx.params["suites"] == ("code", "essay")
    for bad in (["diagnose", "--method", "banana"], ["diagnose", "--logs", "a", "b"],
                ["lab", "up", "--methd", "x"], ["sweep", "--k", "two"]):
        with pytest.raises(click.ClickException):
            parse(bad)


def _help_example(path: tuple[str, ...]) -> list[str]:
    """The command lines of the "Example:" paragraph that closes `specdoctor PATH --help` as
    it prints ([] if the help does not end with one)."""
    cmd = commands()[path].command
    parent = None
    for i, name in enumerate(("specdoctor", *path)):
        parent = click.Context(commands()[path[:i]].command, info_name=name, parent=parent)
    text = cmd.get_help(click.Context(cmd, info_name=path[-1] if path else "specdoctor",
                                      parent=parent.parent if path else None)).rstrip()
    last = re.split(r"\n\s*\n", text)[-1].strip().splitlines()
    if not last or last[0].strip() != "Example:":
        return []
    return [ln.strip() for ln in last[1:]]


@pytest.mark.parametrize("path", sorted(commands()), ids=lambda p: " ".join(p) or "specdoctor")
def test_every_help_ends_with_an_example_that_parses(path):
    examples = _help_example(path)
    assert examples, f"`{' '.join(('specdoctor', *path))} --help` does not end with an Example:"
    for text in examples:
        assert LEAD.match(text), text
        try:
            parse(argv_of(text))
        except click.ClickException as exc:
            pytest.fail(f"the example of {path}: `{text}` does not parse: {exc.format_message()}")
