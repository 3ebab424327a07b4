"""Build-once directories: built once per recipe and inputs, with what decided their bytes."""

from __future__ import annotations

import json

import pytest

from specdoctor.lab.drafters import cache


def test_built_once_per_recipe_and_records_the_machine(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("SPECDOCTOR_MODELS", str(tmp_path / "models"))
    calls = []

    def build(out):
        calls.append(out)
        (out / "w.bin").write_bytes(b"x")
        return {"loss": 1.0}

    a = cache.built("thing", {"steps": 3}, [], build)
    assert cache.built("thing", {"steps": 3}, [], build) == a and len(calls) == 1
    assert cache.built("thing", {"steps": 4}, [], build) != a and len(calls) == 2
    rec = json.loads((a / cache.DONE).read_text())
    assert rec["recipe"] == {"steps": 3} and rec["report"] == {"loss": 1.0}
    assert rec["built_on"]["torch"] == torch.__version__
    assert rec["built_on"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert a.parent == tmp_path / "models"
