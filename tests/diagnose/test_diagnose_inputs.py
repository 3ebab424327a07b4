"""diagnose's inputs as a user gives them: logs from stdin, a pipe, several files each with its
own method and k, a forced engine; a URL with its start-up log; and the flags that make no
sense together. Logs recorded from real lab servers (tests/fixtures/vllm/lab-*, RECORDED.md);
the start-up log with its model paths pointed at model directories made by the test."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from specdoctor.launch import free_port
from tests.conftest import run_cli
from tests.diagnose.recorded import VLLM_FIXTURES
from tests.sources.test_vllm_startup import LAB_MODEL

FAKE = Path(__file__).with_name("fake_server.py")
NGRAM = VLLM_FIXTURES / "lab-ngram-k3" / "server.log"
DRAFT = VLLM_FIXTURES / "lab-draft_model-k4" / "server.log"


def _wait_models(port: int, timeout: float = 30.0) -> None:
    import time
    import urllib.request

    end = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def _json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_a_log_from_stdin_is_read_and_kept_beside_the_report(tmp_path):
    d = _json(run_cli("diagnose", "--logs", "-", "--out", str(tmp_path), "--json",
                      "--no-store", stdin=NGRAM.read_text()))
    # prompt lookup at k=3: the published figure is for k=10, so nothing to call it low against
    assert d["signature"]["class"] == "unreferenced" and "0.65" in d["signature"]["evidence"]
    kept = tmp_path / "logs" / "stdin.log"
    assert kept.read_text() == NGRAM.read_text()
    assert d["served"]["method"] == {"value": "ngram",
                                     "from": f"the start-up log, {kept}:23"}


def test_a_pipe_is_read_as_a_file_is(tmp_path):
    cmd = (f"{shlex.quote(sys.executable)} -m specdoctor diagnose --logs <(cat "
           f"{shlex.quote(str(NGRAM))}) --out {shlex.quote(str(tmp_path))} --json --no-store")
    piped = _json(subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                                 timeout=600))
    direct = _json(run_cli("diagnose", "--logs", str(NGRAM), "--json", "--no-store",
                           "--out", str(tmp_path / "direct")))
    assert piped["signature"] == direct["signature"]
    (kept,) = (tmp_path / "logs").iterdir()   # /dev/fd/N: kept as N.log
    assert kept.read_text() == NGRAM.read_text()


def test_several_files_each_with_its_own_method_and_k(tmp_path):
    # a draft_model server at k=4, then an ngram one at k=3: each read with its own start-up
    # lines; the signature is the last one's, each one's figures are in the notes
    d = _json(run_cli("diagnose", "--logs", str(DRAFT), "--logs", str(NGRAM), "--json",
                      "--no-store", "--out", str(tmp_path)))
    note = next(n for n in d["notes"] if "several speculative configs" in n)
    assert "method=draft_model k=4" in note and "method=ngram k=3" in note
    assert d["served"]["k"]["value"] == 3 and d["served"]["method"]["value"] == "ngram"
    assert "0.65" in d["signature"]["evidence"]


def test_engine_names_the_reader(tmp_path):
    d = _json(run_cli("diagnose", "--logs", str(NGRAM), "--engine", "llamacpp", "--json",
                      "--no-store", "--out", str(tmp_path)))
    assert d["signature"]["class"] == "no-data"
    assert any(n.startswith("logs: llamacpp log lines found, but no speculative-decoding")
               for n in d["notes"]), d["notes"]


def _model(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 8}))
    return path


def test_a_url_with_its_start_up_log_names_where_each_setting_came_from(tmp_path):
    target = _model(tmp_path / "target")
    log = tmp_path / "server.log"
    log.write_text(NGRAM.read_text().replace(LAB_MODEL, str(target)))
    url = f"http://127.0.0.1:{free_port()}"   # nothing listens: the measurement fails
    d = _json(run_cli("diagnose", "--url", url, "--logs", str(log), "--sampling", "greedy",
                      "--json", "--no-store", "--out", str(tmp_path / "out")))
    served = d["served"]
    assert served["target"] == {"value": str(target), "from": f"the start-up log, {log}:23"}
    assert served["k"]["from"] == f"the start-up log, {log}:23" and served["missing"] == []
    assert any(n.startswith("/v1/models: cannot reach") for n in d["notes"])
    assert any(n.startswith("served setup: target " + str(target)) for n in d["notes"])
    # the oracle needs a measurement, and says so instead of the directories
    assert "reference: no oracle (no greedy measurement to compare with)" in d["notes"]


def test_the_logs_of_a_live_server_are_read_before_it_is_measured(tmp_path):
    """A live server's log grows with the requests the diagnosis sends; its windows are read
    before them (the stand-in server appends a window with nothing accepted per request)."""
    log = tmp_path / "server.log"
    log.write_text(NGRAM.read_text())
    alone = _json(run_cli("diagnose", "--logs", str(log), "--json", "--no-store", "--out",
                          str(tmp_path / "alone")))
    port = free_port()
    server = subprocess.Popen([sys.executable, str(FAKE), "--port", str(port), "--log", str(log)],
                              stdout=subprocess.DEVNULL)
    try:
        d = _json(run_cli("diagnose", "--url", f"http://127.0.0.1:{port}", "--logs", str(log),
                          "--sampling", "greedy", "--json", "--no-store", "--out",
                          str(tmp_path / "out")))
    finally:
        server.kill()
        server.wait()
    assert "Drafted: 3000 tokens" in log.read_text()   # the server was sent requests
    # the figures are the log's own, as read alone (the class is crash: completions fail)
    assert d["signature_detail"]["numbers"] == alone["signature_detail"]["numbers"]
    assert d["signature_detail"]["shape"] == alone["signature"]["class"] == "unreferenced"


def test_what_the_oracle_lacks_is_named_with_its_flag(tmp_path):
    # a server that answers (a URL nobody answers is exit 3) and names no model directory
    port = free_port()
    server = subprocess.Popen([sys.executable, str(FAKE), "--port", str(port)],
                              stdout=subprocess.DEVNULL)
    try:
        _wait_models(port)
        d = _json(run_cli("diagnose", "--url", f"http://127.0.0.1:{port}", "--sampling",
                          "greedy", "--json", "--no-store", "--out", str(tmp_path)))
    finally:
        server.kill()
        server.wait()
    need = next(n for n in d["notes"] if n.startswith("the oracle still needs: "))
    for flag in ("--target DIR", "--method", "--k", "--draft DIR"):
        assert flag in need


def test_flags_that_do_not_go_together_are_refused(tmp_path):
    cases = [
        (("--launch", "python -m vllm.entrypoints.openai.api_server --model m", "--url",
          "http://h:1"), "give one target"),
        (("--url", "http://h:1", "--engine", "vllm"), "--engine names the engine of the logs"),
        (("--launch", "python -m vllm.entrypoints.openai.api_server --model m", "--target",
          str(tmp_path)), "read from the server command"),
        (("--logs", str(tmp_path)), "is a directory"),
        (("--logs", str(tmp_path / "nope.log")), "no such file"),
    ]
    for args, message in cases:
        proc = run_cli("diagnose", *args, "--no-store", "--out", str(tmp_path / "o"))
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr[-800:])
        assert "Traceback" not in proc.stderr


def test_a_url_nobody_answers_is_unreachable_exit_3_and_nothing_is_stored(tmp_path):
    # a port just found free: nothing listens on it
    url = f"http://127.0.0.1:{free_port()}"
    db = tmp_path / "store.db"
    proc = run_cli("diagnose", "--url", url, "--db", str(db), "--out", str(tmp_path / "out"))
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert f"cannot reach {url}/v1/models" in proc.stderr and "Traceback" not in proc.stderr
    listed = run_cli("ledger", "list", "--db", str(db), "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["investigations"] == []
