"""The compile-cache hook of ``diagnose``: its verdict mapping on profiles through the pure
``ab.decide`` (Case A's counts and constructed ones), and a launcher whose server never starts
(a real child process that exits with an engine error): no vLLM, no lab server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.diagnose import catalogue
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.compile_cache import experiment as hook
from specdoctor.launch import LaunchSpec

HID = "compile-cache-pollution"


def _p(drafts: int, per_pos: tuple[int, ...], k: int = 3) -> AcceptanceProfile:
    return AcceptanceProfile(drafts=drafts, draft_tokens=drafts * k, accepted_tokens=sum(per_pos),
                             accepted_per_position=per_pos)


def test_the_hook_is_wired_through_hooks():
    spec = catalogue.load().experiments["compile-cache-ab"]
    assert isinstance(catalogue.experiment(spec), hook.Experiment)


def test_recovered_confirms_with_the_recovered_share():
    # Case A: 0.75 accepted per draft as found (a cliff) → 2.26 after a clean cache, k=3
    f = hook.verdict(_p(200, (100, 50, 0)), _p(200, (170, 150, 132)), k=3)
    assert f.hypothesis == HID and f.verdict is Verdict.CONFIRMED
    assert f.recovered is not None
    assert abs(f.recovered - (2.26 - 0.75) / (3 - 0.75)) < 0.01, f.recovered
    assert "0.750 → 2.260" in f.evidence


def test_no_effect_excludes_and_the_wrong_way_is_inconclusive():
    f = hook.verdict(_p(200, (120, 60, 30)), _p(200, (122, 60, 31)), k=3)
    assert f.verdict is Verdict.EXCLUDED and f.recovered is None
    g = hook.verdict(_p(200, (170, 150, 132)), _p(200, (100, 50, 0)), k=3)
    assert g.verdict is Verdict.INCONCLUSIVE and "accepts less" in g.evidence


class FailingLauncher:
    """Starts the launch as a real process; it exits with an engine error before it serves."""

    def __init__(self) -> None:
        self.started: list[LaunchSpec] = []

    def start(self, launch: LaunchSpec, log_path: Path):
        import subprocess

        self.started.append(launch)
        with open(log_path, "wb") as log:
            rc = subprocess.run(launch.argv, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **launch.env}, timeout=60).returncode
        raise SpecdoctorError(f"the server exited with code {rc} before it answered",
                              "read its log")

    def stop(self, server) -> None:  # never reached: nothing started
        raise AssertionError("stop without a server")


def test_a_server_that_does_not_start_is_inconclusive_with_its_log_tail(tmp_path):
    cache = tmp_path / "user-cache"
    (cache / "entry").mkdir(parents=True)
    (cache / "entry" / "model").write_bytes(b"compiled")
    argv = (sys.executable, "-c",
            "import os; r = os.environ['VLLM_CACHE_ROOT']; os.makedirs(r, exist_ok=True); "
            "print('cache root', r); "
            "print('engine boom: bad flag'); raise SystemExit(3)")
    launcher = FailingLauncher()
    ctx = Context(workdir=tmp_path / "work", launch=LaunchSpec(argv, {"VLLM_CACHE_ROOT": str(cache)}),
                  launcher=launcher, prompts=("def f():",), k=3)
    ctx.workdir.mkdir()
    exp = hook.Experiment()
    assert exp.unavailable(ctx) is None
    res = exp.run(ctx, (HID,))
    (f,) = res.findings
    assert f.verdict is Verdict.INCONCLUSIVE
    assert "did not measure" in f.evidence and "engine boom: bad flag" in f.evidence
    assert res.error
    # no greedy measurement: both arms were launched, the second with a fresh cache root
    assert len(launcher.started) == 2
    iso = launcher.started[1].env["VLLM_CACHE_ROOT"]
    assert iso != str(cache) and iso.startswith(str(ctx.workdir))
    assert launcher.started[0].env["VLLM_CACHE_ROOT"] == str(cache)
    # the user's cache is untouched; the isolated root is gone
    assert (cache / "entry" / "model").read_bytes() == b"compiled"
    assert not any(p.name.startswith("isolated-cache") for p in ctx.workdir.iterdir())


def test_without_a_launch_it_says_what_it_needs(tmp_path):
    why = hook.Experiment().unavailable(Context(workdir=tmp_path, url="http://127.0.0.1:1"))
    assert why and "launch" in why
