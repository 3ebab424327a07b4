"""The baseline document: a round trip keeps every figure the gate compares, and a damaged,
hand-edited or newer file is refused with a message naming the field and the fix."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.bench.matrix import Cell, MatrixParams
from specdoctor.bench.stats import Spread
from specdoctor.errors import InputError
from specdoctor.gate import baseline as bl
from specdoctor.gate.compare import CellSample, acceptance_estimates


def sample_baseline() -> bl.Baseline:
    params = MatrixParams(suites=("code",), sampling=("greedy", "official"), concurrency=(1,),
                          num_prompts=16, max_tokens=32)
    cells = []
    for i, sampling in enumerate(params.sampling):
        units = tuple(AcceptanceProfile(10, 40, 12 + (j % 5) - i, (6, 4 - i, 2, (j % 5)), 4)
                      for j in range(16))
        cells.append(bl.BaselineCell(
            Cell("code", sampling, 1),
            CellSample(f"code/{sampling}/c1", 4, units, sum_profiles(units),
                       Spread(101.5, 90.25, 110.0, "requests"),
                       Spread(60.0, 55.0, 65.0, "requests") if i == 0 else None)))
    return bl.Baseline("prod", "2026-12-01T00:00:00Z", {"bench_run": 3, "kind": "bench"},
                       {"label": "ngram:k=4", "command": "vllm serve M"}, params,
                       bl.prompts_digest(params), cells)


def test_round_trip_keeps_what_the_gate_compares(tmp_path: Path):
    b = sample_baseline()
    path = tmp_path / "deploy" / "gate-baseline.json"
    bl.write_file(b, path)
    back = bl.load_file(path)
    assert back.name == "prod" and back.matrix == b.matrix and back.version == bl.VERSION
    assert back.prompts_sha256 == b.prompts_sha256 and back.has_spec_off
    for a, c in zip(b.samples(), back.samples()):
        assert (a.cell, a.k, a.units, a.tok_s, a.spec_off_tok_s) == \
            (c.cell, c.k, c.units, c.tok_s, c.spec_off_tok_s)
        assert acceptance_estimates(a) == acceptance_estimates(c)
    doc = json.loads(path.read_text())
    # readable without specdoctor: each cell's totals carry their 95% intervals
    assert doc["cells"][0]["profile"]["ci95"]["mean_acceptance_length"]
    assert doc["schema"] == bl.SCHEMA and doc["version"] == 1


def _broken(tmp_path: Path, edit) -> str:
    doc = sample_baseline().to_json()
    edit(doc)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as exc:
        bl.load_file(path)
    return str(exc.value)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("schema"), "is not a specdoctor gate baseline"),
    (lambda d: d.update(version=2), "version 2 baseline; this specdoctor"),
    (lambda d: d.update(version="1"), "version is not a positive integer"),
    (lambda d: d.update(cells=[]), "cells is not a non-empty list"),
    (lambda d: d["cells"][1]["requests"][3].__setitem__(2, 99), "accepts more than it drafted"),
    (lambda d: d["cells"][1]["requests"][3].__setitem__(0, -1), "is -1, not a count"),
    (lambda d: d["cells"][0]["requests"].pop(), "does not equal the sum of the cell's requests"),
    (lambda d: d["cells"][0].update(cell="code/greedy/c8"), "its suite, sampling and concurrency"),
    (lambda d: d["cells"][1].update(cell="code/greedy/c1", sampling="greedy"),
     "names a cell twice"),
    (lambda d: d["matrix"].update(prompt_count=3), "unknown fields ['prompt_count']"),
    (lambda d: d["matrix"].update(sampling=["hot"]), "unknown sampling 'hot'"),
    (lambda d: d["cells"][0].update(tok_s={"value": 1}), "tok_s is not {value, low, high"),
])
def test_a_damaged_file_is_refused_naming_the_field(tmp_path: Path, edit, message):
    text = _broken(tmp_path, edit)
    assert message in text, text
    assert "b.json" in text  # which file


def test_not_json_and_missing_file(tmp_path: Path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="is not JSON"):
        bl.load_file(bad)
    with pytest.raises(InputError, match="absent.json: no such file"):
        bl.load_file(tmp_path / "absent.json")
    binary = tmp_path / "b.json"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(InputError, match="not a baseline file"):
        bl.load_file(binary)


def test_other_prompts_than_the_baseline_are_refused():
    b = sample_baseline()
    bl.check_prompts(b, b.matrix)  # the same prompts
    b2 = replace(b, prompts_sha256={"code": "0" * 64})
    with pytest.raises(InputError, match="prompts of 'code' differ"):
        bl.check_prompts(b2, b.matrix)
    # another max-tokens does not change the prompts; another prompt count does
    assert bl.prompts_digest(replace(b.matrix, max_tokens=8)) == b.prompts_sha256
    assert bl.prompts_digest(replace(b.matrix, num_prompts=8)) != b.prompts_sha256
