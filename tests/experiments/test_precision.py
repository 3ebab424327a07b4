"""target-precision-ab: the precision the target is served at (the live engine's, the launch's,
the config's), the verdicts that need no relaunch, the launch it relaunches, the decision on two
measured profiles, and a relaunch that never serves (a real process)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.experiments import precision as px
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.probes import view
from specdoctor.launch import LaunchSpec
from specdoctor.packs.run import collect
from tests.experiments.probes.test_probes import NeverServes

PROBES = Path(__file__).parent / "probes" / "fixtures"
BASE = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "M")


def _ctx(tmp_path: Path, argv: tuple[str, ...] = BASE, cfg: dict | None = None, **kw) -> Context:
    t = tmp_path / "target"
    t.mkdir(exist_ok=True)
    (t / "config.json").write_text(json.dumps(cfg if cfg is not None else {"dtype": "bfloat16"}))
    return Context(workdir=tmp_path, launch=LaunchSpec(argv), target_dir=t, method="draft_model",
                   k=4, **kw)


def test_the_served_precision_comes_from_the_engine_the_launch_then_the_config(tmp_path):
    v = view.read(collect((PROBES / "dflash_window_startup.log").read_text()))
    assert px.served_precision(_ctx(tmp_path, engine_view=v), {"dtype": "bfloat16"})[::2] == (
        "float32", "the live engine")
    ctx = _ctx(tmp_path, (*BASE, "--dtype", "half", "--quantization", "fp8"))
    assert px.served_precision(ctx, {}) == ("float16", "fp8", "the launch's --dtype")
    assert px.served_precision(_ctx(tmp_path), {"torch_dtype": "bfloat16"})[0] == "bfloat16"
    stored = {"quantization_config": {"quant_method": "modelopt_fp4"}}
    assert px.served_precision(_ctx(tmp_path), stored)[1] == "modelopt_fp4"


def test_verdicts_without_a_relaunch():
    f = px.without_relaunch("float32", None, False, "the launch's --dtype")
    assert f is not None and f.verdict is Verdict.EXCLUDED
    f = px.without_relaunch("bfloat16", "modelopt_fp4", True, "x")
    assert f is not None and f.verdict is Verdict.INCONCLUSIVE and "stored quantized" in f.evidence
    assert px.without_relaunch("bfloat16", None, False, "x") is None
    assert px.without_relaunch("float32", "fp8", False, "x") is None


def test_the_relaunch_serves_the_target_at_float32_unquantized():
    hi = px.higher(LaunchSpec((*BASE, "--dtype", "bfloat16", "--quantization", "fp8")))
    assert hi.arg("--dtype") == "float32" and hi.arg("--quantization") is None
    assert px.higher(LaunchSpec(BASE)).arg("--dtype") == "float32"


def _p(per_pos: tuple[int, ...], drafts: int = 100) -> AcceptanceProfile:
    return AcceptanceProfile(drafts=drafts, draft_tokens=drafts * len(per_pos),
                             accepted_tokens=sum(per_pos), accepted_per_position=per_pos)


class Served:
    """Measured profiles as a measurement carries them (``.total``)."""

    def __init__(self, total: AcceptanceProfile) -> None:
        self.total = total


def test_a_relaunch_that_never_serves_is_inconclusive(tmp_path):
    argv = (sys.executable, "-c", "print('float32 does not fit'); raise SystemExit(2)")
    launcher = NeverServes()
    ctx = _ctx(tmp_path, (*argv, "--dtype", "bfloat16"), launcher=launcher, prompts=("x",))
    ctx.measured.greedy = Served(_p((60, 30, 10, 5)))
    res = px.Experiment().run(ctx, (px.HID,))
    f = res.findings[0]
    assert f.verdict is Verdict.INCONCLUSIVE and "exited with code 2" in f.evidence
    assert "float32 does not fit" in f.evidence
    assert launcher.started[0].arg("--dtype") == "float32"
