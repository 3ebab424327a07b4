"""The relaunch counterfactual where it cannot relaunch (llama-server reads its drafter from a
GGUF file no edited copy stands for): a drafter whose contract names no lead has nothing to
relaunch for, and says so from its files; one with a lead stays for a relaunch (no answer)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="the contract reads the installed vLLM's source (bash scripts/install.sh test)")


def _ctx(tmp_path: Path, **changes: object):
    from specdoctor.experiments.base import Context
    from specdoctor.lab.models import target_model

    src = target_model()
    d = tmp_path / "m2"
    shutil.copytree(src, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))
    return Context(workdir=tmp_path, engine="llamacpp", method="draft_model", k=4,
                   target_dir=src, draft_dir=d)


def test_a_drafter_with_no_lead_is_answered_without_a_relaunch(tmp_path: Path) -> None:
    from specdoctor.experiments.counterfactual import RelaunchCounterfactual

    r = RelaunchCounterfactual().without_running(
        _ctx(tmp_path), ("draft-config-mismatch", "attention-mask"))
    assert r is not None
    got = {f.hypothesis: f for f in r.findings}
    assert set(got) == {"draft-config-mismatch", "attention-mask"}
    assert all(f.verdict.value == "excluded" and "nothing to set" in f.evidence
               and "llamacpp" in f.evidence for f in got.values())


def test_a_drafter_with_a_lead_waits_for_a_relaunch(tmp_path: Path) -> None:
    from specdoctor.experiments.counterfactual import RelaunchCounterfactual

    ctx = _ctx(tmp_path, rms_norm_eps=1.0)
    assert RelaunchCounterfactual().without_running(ctx, ("draft-config-mismatch",)) is None
