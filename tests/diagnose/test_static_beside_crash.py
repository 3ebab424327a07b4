"""A server that cannot start still gets every static experiment: the config audit with the
launch's own parallel layout (Case B's dropped decode_context_parallel_size, from vLLM's own
code, no server), the launch lints, the model audit, masks, astexec and the vocabulary check,
reported beside the crash.

The unit test runs the static step on the lab's tiny target (no server); the lab test boots the
issue's example for real: an MTP launch with --tensor-parallel-size 4
--decode-context-parallel-size 2, which this CPU machine cannot serve."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import orchestrator
from specdoctor.diagnose.ledger import build
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.experiments.base import Context
from specdoctor.launch import LaunchSpec
from tests.conftest import run_cli

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")


@needs_vllm
def test_the_static_experiments_run_beside_a_crash_with_the_launchs_layout(tmp_path):
    from specdoctor.lab.models import target_model

    target = target_model()
    launch = LaunchSpec((sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                         str(target), "--speculative-config",
                         json.dumps({"method": "mtp", "num_speculative_tokens": 2}),
                         "--tensor-parallel-size", "4", "--decode-context-parallel-size", "2"))
    ctx = Context(workdir=tmp_path, launch=launch, method="mtp", k=2, target_dir=target,
                  errors=["the server did not start"])
    sig = classify(Facts(None, errors=("the server did not start",), method="mtp", k=2))
    assert sig.cls == "crash"
    cat = C.load()
    ledger = build(sig, cat, 2.0)
    notes: list[str] = []
    orchestrator._static_whatever(ctx, ledger, cat, notes)
    ran = {r.experiment: r for r in ledger.results}
    assert {"config-audit", "masks", "astexec"} <= set(ran) | {
        n.split()[3] for n in notes if " not run (" in n}
    audit = ran["config-audit"]
    dpc = [f for f in audit.findings if f.hypothesis == "draft-parallel-config"]
    assert dpc and "decode_context_parallel_size" in dpc[0].evidence
    assert "'tensor_parallel_size': 4" in dpc[0].evidence
    said = next(n for n in notes if n.startswith("beside the crash: config-audit: "))
    assert "decode_context_parallel_size" in said
    # a lead beside the crash, not the crash's cause
    assert ledger.answer().root is None


@pytest.mark.lab
def test_an_mtp_launch_this_machine_cannot_serve_still_gets_the_static_experiments(tmp_path):
    from specdoctor.lab import lab as labmod

    labmod.check_installed()
    # the ci pair: the server never starts, and the full pair would cost a cold cache ~20 min
    cmd = labmod.lab_spec("mtp", k=None, port=8000, budget="ci").shell_command() + (
        " --tensor-parallel-size 4 --decode-context-parallel-size 2")
    proc = run_cli("diagnose", "--launch", cmd, "--no-store", "--no-spec-off", "--budget", "1",
                   "--ready-timeout", "400", "--out", str(tmp_path), "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads(proc.stdout)
    assert d["signature"]["class"] == "crash"
    ran = {e["experiment"]: e for e in d["experiments"]}
    assert "config-audit" in ran, (list(ran), d["notes"])
    dpc = [f for f in ran["config-audit"]["findings"]
           if f["hypothesis"] == "draft-parallel-config"]
    assert dpc and "decode_context_parallel_size" in dpc[0]["evidence"]
    assert any(n.startswith("beside the crash: config-audit: ") for n in d["notes"])
    report = (tmp_path / "report.md").read_text()
    assert "### config-audit" in report and "decode_context_parallel_size" in report
