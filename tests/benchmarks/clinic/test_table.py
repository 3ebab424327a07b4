"""The scoreboard scores a fault that did not bite on its machine apart (table.py ``inert``),
from the latest row of the real clinic.json and from that row with its measurement beside the
twin as run.py records it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "clinic"))

import table
from run import CASES


def _latest_with(bites: dict | None) -> tuple[list, dict]:
    by_case = table.rows_by_case(json.loads(table.RESULTS.read_text()))
    row = dict(by_case["dflash-shipped"][-1])
    row.pop("bites_here", None)   # the row as diagnosed, then with the measurement given
    if bites is not None:
        row["bites_here"] = bites
    return CASES, {**by_case, "dflash-shipped": [row]}


def _fault_dev_line(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("- fault (dev):"))


def test_a_fault_that_did_not_bite_here_is_listed_apart_not_scored():
    bites = {"twin_case": "healthy-dflash", "difference": 0.012, "ci95": [-0.02, 0.04],
             "bites": False, "accepted_per_draft": {"case": 1.2, "twin": 1.188}, "prompts": 16}
    cases, by_case = _latest_with(bites)
    md = table.render(cases, by_case)
    scored = _fault_dev_line(md)
    cases0, by_case0 = _latest_with(None)
    before = _fault_dev_line(table.render(cases0, by_case0))
    # one case fewer in the share, and the reason beside it
    _, d0 = before.split(": ")[1].split()[0].split("/")
    _, d1 = scored.split(": ")[1].split()[0].split("/")
    assert int(d1) == int(d0) - 1, (before, scored)
    assert "did not bite on this machine (dflash-shipped: 1.2 vs healthy-dflash 1.188" in md
    assert "| inert here |" in md


def test_a_fault_that_bit_is_scored_as_before():
    bites = {"twin_case": "healthy-dflash", "difference": -0.2, "ci95": [-0.3, -0.1],
             "bites": True, "accepted_per_draft": {"case": 1.0, "twin": 1.2}, "prompts": 16}
    cases, by_case = _latest_with(bites)
    cases0, by_case0 = _latest_with(None)
    assert _fault_dev_line(table.render(cases, by_case)) == _fault_dev_line(
        table.render(cases0, by_case0))


def _through(data: dict, commit: str) -> dict:
    """The recorded runs up to the last one at ``commit`` (the file as it stood then)."""
    last = max(i for i, r in enumerate(data["runs"]) if r.get("commit") == commit)
    return {**data, "runs": data["runs"][:last + 1]}


def test_a_full_run_recorded_in_parts_is_taken_together():
    """The run at f101d60 was recorded in three parts over two sessions: together they are
    the latest full run, each case once, the cases measured without a bite left out."""
    data = json.loads(table.RESULTS.read_text())
    parts = [r for r in data["runs"] if r.get("commit") == "f101d60"]
    assert len(parts) >= 3 and all(len(p["rows"]) < 74 for p in parts)
    measured = json.loads(table.MEASURED.read_text())
    full = table.full_run(_through(data, "f101d60"), measured)
    assert (full["commit"], full["cases"], full["answered"]) == ("f101d60", 74, 74)
    assert full["quiet"] == (0, 14) and full["patched"] == (1, 1)
    assert "up-eagle3-aux-partial-sum" in full["idle"]   # measured beside its twin: no bite
    assert full["faults"] == (41, 49)   # 58 faults keyed, 9 without a bite left out


def test_the_latest_full_run_lists_the_lab_fault_left_out_of_the_key_apart():
    data = _through(json.loads(table.RESULTS.read_text()), "e184aa4")
    full = table.full_run(data)
    assert (full["commit"], full["cases"], full["answered"]) == ("e184aa4", 51, 51)
    assert full["faults"] == (37, 37) and full["patched"] == (1, 1)
    assert full["quiet"] == (0, 11) and full["left_out"] == ["dflash-causal"]
    assert full["idle"] == ["dflash-shipped"]
    md = table.render(CASES, table.rows_by_case(data), data)
    assert "healthy or benign cases given a cause: 0 of 11" in md
    benign = next(line for line in md.splitlines() if line.startswith("- benign (dev):"))
    assert benign == "- benign (dev): 0/2 given a cause"
    assert "not scored: dflash-causal, a lab fault" in md


def test_a_full_run_begun_is_reported_beside_the_latest_full_one():
    """The run begun at f6ef1a7, as recorded through its 27th case (draft-overhead-wide):
    reported with how far it got and how many of its named causes state what they explain
    (draft-heads-lost, named by the taps, does not); with the full run it follows the last one
    recorded, no such line."""
    data = json.loads(table.RESULTS.read_text())
    last = next(i for i, r in enumerate(data["runs"]) if r.get("commit") == "f6ef1a7"
                and any(row["case"] == "draft-overhead-wide" for row in r["rows"]))
    data = {**data, "runs": data["runs"][:last + 1]}
    blank, line = table.begun_lines(data, len(CASES))
    assert blank == ""
    assert line.startswith("A full run begun at f6ef1a7 (clean tree")
    assert "27 of 133 cases answered so far" in line
    assert "named causes that state what they explain: 15 of 16" in line
    assert table.begun_lines(_through(data, "f101d60"), len(CASES)) == []
