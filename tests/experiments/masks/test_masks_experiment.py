"""The masks experiment's decisions: on the draft as a real lab server built it (the recorded
start-up lines of the DFlash drafter served with a 4-token window), on the same drafter's
config without the window, on a windowed causal drafter served by a backend whose code (a
snapshot of another version, written here) compares the window edge with ``<=``, and the op
itself read back where vLLM's CPU build is installed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from specdoctor.experiments.base import Context

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.masks import experiment as mx
from specdoctor.experiments.masks.cite import CodeRoot
from specdoctor.experiments.masks.served import Served, ServedLayer, backend_from_logs, served
from specdoctor.experiments.probes import view
from specdoctor.packs.run import collect

PROBES = Path(__file__).parents[1] / "probes" / "fixtures"
HID = "attention-mask"


def _cfg(name: str) -> dict:
    return json.loads((PROBES / name).read_text())


def _ctx(tmp_path: Path, cfg: dict, **kw) -> Context:
    d = tmp_path / "drafter"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    t = tmp_path / "target"
    t.mkdir(exist_ok=True)
    (t / "config.json").write_text((PROBES / "dflash_target.json").read_text())
    return Context(workdir=tmp_path, method="dflash", k=3, draft_dir=d, target_dir=t, **kw)


def test_the_live_window_is_a_lead_naming_the_field(tmp_path):
    v = view.read(collect((PROBES / "dflash_window_startup.log").read_text()))
    ctx = _ctx(tmp_path, _cfg("dflash_window_draft.json"), engine_view=v)
    s = served(ctx)
    assert s is not None and s.source == "the live engine (startup probes)"
    assert [(x.window, x.causal, x.backend) for x in s.draft] == [(4, False, "cpu")] * 2
    f, leads, _ = mx.decide(s, _cfg("dflash_window_draft.json"), 3, 1024, run_op=False)
    assert f.verdict is Verdict.INCONCLUSIVE and "served non-causal, window 4" in f.evidence
    assert [(x.field, x.value) for x in leads] == [("dflash_config.use_swa", False)]


def test_dflash_without_its_window_is_served_its_own_mask_and_excluded(tmp_path):
    cfg = _cfg("dflash_window_draft.json")
    cfg["dflash_config"] = {**cfg["dflash_config"], "use_swa": False}
    ctx = _ctx(tmp_path, cfg)
    s = served(ctx)
    assert s is not None and s.source == "the drafter's config"
    f, leads, _ = mx.decide(s, cfg, 3, 1024, run_op=False)
    assert f.verdict is Verdict.EXCLUDED and not leads, f.evidence
    causal = {**cfg, "dflash_config": {**cfg["dflash_config"], "causal": True}}
    f, leads, _ = mx.decide(served(_ctx(tmp_path, causal)), causal, 3, 1024, run_op=False)
    assert f.verdict is Verdict.INCONCLUSIVE
    assert [(x.field, x.value) for x in leads] == [("dflash_config.causal", False)]


def test_a_backend_whose_window_edge_is_inclusive_is_a_lead(tmp_path):
    snap = tmp_path / "snap"
    flex = snap / "vllm/v1/attention/backends/flex_attention.py"
    flex.parent.mkdir(parents=True)
    flex.write_text("        return torch.abs(q_idx - kv_idx) <= self.sliding_window\n")
    layers = [ServedLayer("draft layer 0", 8, True, 4, 2, 32, "flex")]
    s = Served("eagle3", layers, [], "the drafter's config", "the server log")
    cfg = {"sliding_window": 8}
    f, leads, nums = mx.decide(s, cfg, 3, 1024, code=CodeRoot(snap), run_op=False)
    assert f.verdict is Verdict.INCONCLUSIVE, f.evidence
    assert "q-k=8" in f.evidence and "only on the window's edge diagonal" in f.evidence
    assert [(x.field, x.value) for x in leads] == [("sliding_window", 7)]
    # the installed flex backend compares with `<`: the same drafter is served as trained
    f, _, _ = mx.decide(s, cfg, 3, 1024, run_op=False)
    assert f.verdict is Verdict.EXCLUDED, f.evidence


def test_the_backend_comes_from_the_log_and_lookup_has_no_mask(tmp_path):
    assert backend_from_logs({"x": "INFO [cuda.py:446] Using FLASH_ATTN backend."}) == "fa2"
    assert backend_from_logs({"x": "nothing"}) is None
    ctx = Context(workdir=tmp_path, method="ngram", k=3)
    assert mx.Experiment().unavailable(ctx) is None
    res = mx.Experiment().run(ctx, (HID,))
    assert res.findings[0].verdict is Verdict.EXCLUDED


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM's CPU op")
def test_the_cpu_op_is_read_back_for_the_served_window(tmp_path):
    layers = [ServedLayer("draft layer 0", 8, True, 4, 2, 32, "cpu")]
    s = Served("eagle3", layers, [], "the drafter's config", "vLLM's CPU build here")
    f, _, nums = mx.decide(s, {"sliding_window": 8}, 3, 1024)
    assert f.verdict is Verdict.EXCLUDED, f.evidence
    assert "the cpu op read back on" in f.evidence and "as its model" in f.evidence
