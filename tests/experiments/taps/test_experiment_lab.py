"""The taps experiment of ``diagnose`` on real vLLM (two boots: the experiment's own relaunch of
the healthy lab, then of the lab with the draft-heads-lost runtime patch on its PYTHONPATH).

Healthy: every tapped draft attention head matches fp64 within float32 rounding → excluded.
Faulty: the patch is the launch's own PYTHONPATH entry, the taps pack goes after it and so wraps
it → the heads it drops are seen and the hypothesis is confirmed with them named."""

from __future__ import annotations

import pytest

from specdoctor.experiments.base import Context

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.taps import experiment as hook

pytestmark = pytest.mark.lab


def _run(tmp_path, fault: str | None):
    from specdoctor.bench.prompts import take
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import Servers, free_port

    launch = labmod.lab_spec("draft_model", 4, free_port(), fault=fault)
    ctx = Context(workdir=tmp_path, launch=launch, launcher=Servers(timeout_s=1500),
                  method="draft_model", k=4, prompts=tuple(take("code", 4)))
    exp = hook.Experiment()
    assert exp.unavailable(ctx) is None
    res = exp.run(ctx, (hook.HID, hook.PARALLEL))
    return res, {f.hypothesis: f for f in res.findings}


def test_healthy_lab_excluded_and_faulty_lab_confirmed(tmp_path):
    res, by = _run(tmp_path / "healthy", None)
    assert res.error is None, res.to_json()
    assert by[hook.HID].verdict is Verdict.EXCLUDED, by[hook.HID].evidence
    s = res.numbers["summary"]
    assert s["records"] >= 8 and s["cells_off"] == 0
    assert max(s["max_rel_err_per_head"]) < 8 * 2.0 ** -23     # float32 rounding only
    assert res.numbers["accepted_per_draft_with_taps"] == 4.0   # the taps change nothing
    assert by[hook.PARALLEL].verdict is Verdict.EXCLUDED
    _taps_check_trusts(res.numbers["tapdir"])

    res, by = _run(tmp_path / "faulty", "draft-heads-lost")
    f = by[hook.HID]
    assert f.verdict is Verdict.CONFIRMED, f.evidence
    s = res.numbers["summary"]
    assert s["heads_off"] == [1, 2, 3] and s["cells_zero"] == s["cells_off"]
    assert s["off_rows_position"][0] >= 0.25 and s["matching_rows_position"][1] < 0.25
    assert "3 of 4 heads (1, 2, 3)" in f.evidence
    assert res.numbers["accepted_per_draft_with_taps"] < 1.0    # the fault bit under the taps


def _taps_check_trusts(tapdir: str) -> None:
    """The healthy relaunch's taps, read back by `specdoctor taps check` as a user would: draft
    layers only, every call recomputed at cosine >= 0.9999."""
    import json
    from pathlib import Path

    from tests.conftest import run_cli

    files = sorted(Path(tapdir).glob("*.safetensors"))
    assert files, "the pack tapped nothing"
    layers = {f.name.split(".r")[0] for f in files}
    assert all(x.startswith("attn.draft_model.") for x in layers), layers  # draft only
    proc = run_cli("taps", "check", tapdir, "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    found = json.loads(proc.stdout)["findings"]
    cos = [f["data"]["cosine"] for f in found if f["check"] == "recompute"]
    assert len(cos) == len(files) and min(cos) >= 0.9999
