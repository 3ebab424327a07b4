"""restart-ab reads the uptime drift of the log windows it is given (recorded from a real lab
server, tests/fixtures/vllm/lab-draft_model-k4/RECORDED.md), and says why when the restart
cannot run."""

from __future__ import annotations

from pathlib import Path

from specdoctor.diagnose.log_evidence import read_for_diagnosis
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.relaunch import RestartAB
from specdoctor.launch import parse_command

LOG = Path(__file__).parents[1] / "fixtures" / "vllm" / "lab-draft_model-k4" / "server.log"


def test_a_restart_that_cannot_run_is_inconclusive_with_its_reason(tmp_path):
    windows = tuple(read_for_diagnosis([LOG]).windows)
    assert windows
    ctx = Context(tmp_path, launch=parse_command("vllm serve m", {}), windows=windows)
    r = RestartAB().run(ctx, ("uptime-drift",))
    (f,) = r.findings
    assert f.verdict is Verdict.INCONCLUSIVE
    assert f.evidence == "restart failed: no launcher: this target cannot be restarted"
