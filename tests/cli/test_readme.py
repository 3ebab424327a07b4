"""README.md and the CLI agree, and the docs reference only what the project has.

- Every command in `cli.main.COMMANDS` has a row in README's Commands table.
- Every flag of every command (subcommands included) is documented: in README, or in a docs
  page that the command's row links. A new command passes once its row and its page exist.
- The other direction, a documented flag or command that does not exist, is
  tests/cli/test_hints.py.
- Every file of the project that README or docs/ name (links, and code spans that start with
  one of the project's own directories) exists.
- The terms README uses are defined in its Terms section; a line that uses one before that
  section links to it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.clitree import commands

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PACKAGE_DIRS = {p.name for p in (ROOT / "src" / "specdoctor").iterdir() if p.is_dir()}
REPO_DIRS = {"src", "tests", "docs", "scripts", "benchmarks"}
TERMS = ("k", "draft token", "acceptance length", "bonus token", "drafter", "d2t", "aux states")


def _section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def command_rows() -> dict[str, list[str]]:
    """Top-level command -> the README Commands-table rows that name it."""
    top = {p[0] for p in commands() if len(p) == 1}
    rows: dict[str, list[str]] = {}
    for line in _section(README.read_text(), "Commands").splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split(" | ")[0]
        for span in re.findall(r"`([^`]+)`", first_cell):
            words = span.split()
            if words and words[0] == "specdoctor":
                words = words[1:]
            name = words[0] if words else ""
            if name in top:
                rows.setdefault(name, []).append(line)
    return rows


def _mentions(text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def test_every_command_has_a_readme_row():
    rows = command_rows()
    missing = sorted({p[0] for p in commands() if len(p) == 1} - set(rows))
    assert not missing, (f"commands without a row in README's Commands table: {missing}; add a "
                         "row whose first cell names `specdoctor CMD …` and links its docs page")


def test_every_flag_is_documented_in_readme_or_the_page_its_row_links():
    readme = README.read_text()
    rows = command_rows()
    undocumented = []
    for path, cmd in commands().items():
        if not path:
            continue
        pages = {m for row in rows.get(path[0], []) for m in re.findall(r"\((docs/[\w-]+\.md)\)", row)}
        text = readme + "".join((ROOT / p).read_text() for p in sorted(pages) if (ROOT / p).is_file())
        for flag in sorted(cmd.flags - {"--help"}):
            if flag.startswith("--") and not _mentions(text, flag):
                undocumented.append(f"{cmd.name} {flag} (README or {', '.join(sorted(pages)) or 'no linked page'})")
    assert not undocumented, ("flags documented nowhere (name each in README or in a docs page "
                              "that the command's README row links):\n" + "\n".join(undocumented))


def _own_paths(text: str) -> list[str]:
    """Paths of the project itself that TEXT names: link targets and code spans that start with
    one of its directories (`tests/fixtures/`, `lab/faults.py`, `scripts/install.sh`)."""
    out = [t for t in re.findall(r"\]\(([^)#\s]+)\)", text) if "://" not in t]
    for span in re.findall(r"`([^`\s]+)`", text):
        head = span.split("/", 1)[0]
        if "/" in span and (head in REPO_DIRS or head in PACKAGE_DIRS) and not re.search(
                r"[A-Z]{3}|[*{<$]", span):
            out.append(span)
    return out


def _exists(ref: str, base: Path) -> bool:
    ref = ref.rstrip("/")
    for root in (base, ROOT, ROOT / "src" / "specdoctor"):
        if (root / ref).exists():
            return True
    return False


def test_docs_name_only_files_the_project_has():
    missing = []
    for page in [README, *DOCS]:
        for ref in _own_paths(page.read_text()):
            if not _exists(ref, page.parent):
                missing.append(f"{page.relative_to(ROOT)}: {ref}")
    assert not missing, "references to files the project does not have:\n" + "\n".join(missing)


def test_terms_are_defined_before_first_use():
    text = README.read_text()
    terms = _section(text, "Terms")
    start = text.index("## Terms")
    for term in TERMS:
        pattern = rf"(?<![\w`-]){re.escape(term)}(?![\w-])"
        assert re.search(rf"\*\*{re.escape(term)}\*\*", terms, re.I), f"Terms does not define {term!r}"
        for m in re.finditer(pattern, text[:start], re.I):  # a use before Terms links to it
            line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.start())]
            assert "(#terms)" in line, f"{term!r} is used before the Terms section: {line!r}"


def test_the_checks_catch_what_they_are_for(tmp_path):
    # a missing file and an undocumented flag are seen (the real README has neither)
    page = tmp_path / "p.md"
    page.write_text("See `tests/fixtures/vllm/nope.log` and [x](docs/nope.md); `lab/faults.py`.")
    refs = _own_paths(page.read_text())
    assert refs == ["docs/nope.md", "tests/fixtures/vllm/nope.log", "lab/faults.py"]
    assert [r for r in refs if not _exists(r, tmp_path)] == refs[:2]
    assert not _mentions("use --portable", "--port") and _mentions("[--port 8765]", "--port")
