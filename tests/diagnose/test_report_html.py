"""The diagnosis report.html is a page, not Markdown in a box: headings, the ledger as a table
whose evidence wraps, each experiment's curves beside its findings; one self-contained file,
laid out by headless Chromium (Debian's package, installed by scripts/install.sh test).

The diagnosis is built as the orchestrator builds it, from profiles recorded on the lab (the
`dflash-window` fault classified against the published DFlash figure, the ledger planned for
that signature, a counterfactual's before/after curves: the fault and the healthy drafter), and
the evidence of a ledger entry ends in a long path and the command that uses it: what has to
wrap without hiding anything.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import ledger as L
from specdoctor.diagnose.orchestrator import Diagnosis
from specdoctor.diagnose.report import html_page
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from tests.diagnose.recorded import mean_only, profile

LONG = ("the counterfactual could not run here: the drafter lives in /data/hf/hub/"
        "models--example--qwen3-8b-dflash-b16/snapshots/3f1c2a9e8d7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a/"
        "config.json; to run it: specdoctor diagnose --launch 'vllm serve MODEL' --out report-dir")


@pytest.fixture(scope="module")
def report() -> tuple[object, str]:
    # Case A's shape, as the lab's dflash-window fault measured it, against the published DFlash
    # figure: a cliff, and the ledger the diagnosis plans for it
    sig = classify(Facts(profile("dflash-window"), mean_only(2.93, 3), method="dflash"))
    led = L.build(sig, C.load(), restart_min=2.0)
    mask = next(e for e in led.entries if e.hypothesis == "attention-mask")
    led.apply(ExperimentResult(
        mask.experiment,
        [Finding("attention-mask", Verdict.CONFIRMED, "use_swa false recovers the healthy profile",
                 recovered=0.9)],
        curves={"before": profile("dflash-window"), "after: use_swa=false": profile("healthy:dflash")},
        wall_s=61.0))
    led.entries[0].evidence.append(LONG)
    root, others = led.root_cause()
    d = Diagnosis(sig, led, root, others, notes=["a note"])
    return d, html_page(d, "server.log")


class _Outline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.h2: list[str] = []
        self.rows = 0
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_h2 = tag == "h2"
        self.rows += tag == "tr"

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data.strip())
            self._in_h2 = False


def test_the_page_has_headings_a_ledger_table_and_plots_in_their_experiment(report):
    d, page = report
    outline = _Outline()
    outline.feed(page)
    assert "pre" not in outline.tags  # no Markdown text in a fixed-width block
    assert [h.split(":")[0] for h in outline.h2][:4] == ["Signature", "Root cause",
                                                         "Ledger (verdict-cost order)",
                                                         "Experiments"]
    assert outline.rows == len(d.ledger.entries) + 1  # a header and one row per hypothesis
    assert f"<td class='evidence'>{LONG.replace(chr(39), '&#x27;')}</td>" in page  # whole
    exp = next(r.experiment for r in d.ledger.results if len(r.curves) == 2)
    section = re.search(rf"<section class='experiment' id='{exp}'>.*?</section>", page, re.S).group(0)
    assert page.count("<svg") == 1 and "<svg" in section  # the one experiment with two curves
    assert "after: use_swa=false (AL" in section
    assert not re.search(r"<script|<link|src=['\"]http", page)  # nothing fetched, nothing run


CHECK = """<script>
const out = {}, vw = window.innerWidth;
out.page = document.documentElement.scrollWidth <= vw;
out.cells = [...document.querySelectorAll('td.evidence')].every(c => c.scrollWidth <= c.clientWidth + 1);
const s = document.querySelector('svg').closest('section');
const t = s.querySelector('.text').getBoundingClientRect(), f = s.querySelector('svg').getBoundingClientRect();
out.beside = f.left >= t.right - 1 && f.top < t.bottom && f.width > 200;
document.body.setAttribute('data-layout', JSON.stringify(out));
</script>"""


def _layout(page: str, tmp: Path, width: int) -> dict:
    import json

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is missing: bash scripts/install.sh test installs it"
    f = tmp / f"page-{width}.html"
    f.write_text(page.replace("</body>", CHECK + "</body>"))
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--window-size={width},1000", "--dump-dom", f.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    raw = re.search(r"data-layout=\"([^\"]*)\"", dom).group(1)
    return json.loads(raw.replace("&quot;", '"'))


def test_chromium_lays_it_out_wrapped_with_the_figure_beside_its_findings(report, tmp_path):
    _, page = report
    wide = _layout(page, tmp_path, 1300)
    assert wide == {"page": True, "cells": True, "beside": True}, wide
    narrow = _layout(page, tmp_path, 700)  # the evidence still wraps; nothing runs off the page
    assert narrow["page"] and narrow["cells"], narrow


def test_the_report_replaces_a_symlink_in_its_folder_and_never_writes_through_it(report,
                                                                               tmp_path):
    """``diagnose -o DIR``: a report.md already in DIR that links elsewhere is replaced by the
    report; the file it pointed to is left as it was."""
    from specdoctor.diagnose.report import write_report

    d, _ = report
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("keep me")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "report.md").symlink_to(outside)
    (folder / "report.html").symlink_to(outside)
    path = write_report(d, folder, "server.log")
    assert path == folder / "report.md"
    assert outside.read_text() == "keep me"
    assert not (folder / "report.md").is_symlink()
    assert (folder / "report.md").read_text().startswith("# specdoctor diagnosis")
