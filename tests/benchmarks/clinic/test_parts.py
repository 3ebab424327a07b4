"""The scoreboard scores the part of an answer apart from its mechanism (table.py
``part_scores``), on the first answers recorded in the real clinic.json, for the cases keyed
with a part; the part of an answer is read from its hypothesis through the examiner's map
(``patients.PART_OF``)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "clinic"))

import patients
import table
from run import CASES

BY_NAME = {c.name: c for c in CASES}
# Recorded first answers: own-embed engine-drafting (its key), block-behind engine-drafting
# (keyed rope-sync: the drafting part, another mechanism), norm-no-residual null (no part).
KEYED = {"up-eagle3-own-embed-overwritten": "drafting", "up-dflash-block-behind": "drafting",
         "up-eagle3-norm-no-residual": "drafting"}


def _keyed_cases() -> list:
    """Every case of run.py, keyed with a part only where KEYED says (the cases that carry
    one in run.py are left without it here, so that the counts are the test's own)."""
    return [dataclasses.replace(c, part=KEYED.get(c.name)) for c in CASES]


def _first() -> dict:
    by_case = table.rows_by_case(json.loads(table.RESULTS.read_text()))
    return {n: table.first_try(rows) for n, rows in by_case.items()}


def test_part_and_mechanism_are_scored_apart_on_the_first_try():
    s = table.part_scores(_keyed_cases(), _first())
    assert (s["keyed"], s["tried"]) == (3, 3)
    assert s["part"] == 2          # engine-drafting twice: the drafting part both times
    assert s["mechanism"] == 1     # only own-embed's engine-drafting is its mechanism
    md = table.render(_keyed_cases(), table.rows_by_case(json.loads(table.RESULTS.read_text())))
    assert "part right **2/3**, mechanism right **1/3**" in md
    assert ("| up-dflash-block-behind | drafting | rope-sync | engine-drafting (replay) | "
            "drafting | yes | **no** |") in md
    assert "| up-eagle3-norm-no-residual | drafting | engine-drafting | null | no part | **no** |" \
        in md


def test_a_case_without_a_part_is_not_in_the_part_score():
    assert table.part_scores(CASES, _first())["keyed"] == sum(c.part is not None for c in CASES)
    plain = [dataclasses.replace(c, part=None) for c in CASES]
    md = table.render(plain, table.rows_by_case(json.loads(table.RESULTS.read_text())))
    assert "part and mechanism apart" not in md


def test_an_answer_with_no_cause_is_the_right_part_only_for_a_case_of_part_none():
    row = {"case": "x", "root_cause": None, "right": False}
    assert table.part_right(row, "none") is True
    assert table.part_right(row, "drafting") is False
    assert table.part_right({**row, "root_cause": "engine-drafting"}, "none") is False
    assert table.part_right({"case": "x", "error": "build"}, "drafting") is None


def test_every_catalogue_hypothesis_has_a_part():
    cat = json.loads((ROOT / "src" / "specdoctor" / "verdict" / "data" /
                      "catalogue.json").read_text())
    ids = {h["id"] for h in (cat["hypotheses"] if isinstance(cat, dict) else cat)}
    assert ids <= set(patients.PART_OF), sorted(ids - set(patients.PART_OF))
    assert set(patients.PART_OF.values()) <= set(patients.PARTS)


def test_a_part_outside_the_list_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        dataclasses.replace(BY_NAME["healthy-self"], part="engine")


def test_a_case_measured_beside_its_twin_without_a_bite_is_not_scored():
    first = _first()
    measured = {"rows": [{"case": "up-dflash-block-behind", "vs_twin": {"greedy": {
        "bites": False, "per_output_token": {"bites": False}}}}]}
    s = table.part_scores(_keyed_cases(), first, measured)
    assert s["idle"] == ["up-dflash-block-behind"]
    assert (s["tried"], s["part"], s["mechanism"]) == (2, 1, 1)
    bit = {"rows": [{"case": "up-dflash-block-behind", "vs_twin": {"greedy": {
        "bites": False, "per_output_token": {"bites": True}}}}]}
    assert table.part_scores(_keyed_cases(), first, bit)["idle"] == []
