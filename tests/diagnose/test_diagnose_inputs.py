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


def test_several_servers_are_refused_in_either_order_and_diagnosed_apart_by_file(tmp_path):
    # a draft_model server at k=4 and an ngram one at k=3: never "the last one named wins";
    # refused together as `logs` refuses them, each diagnosed with its own method and k by file
    for order in ((DRAFT, NGRAM), (NGRAM, DRAFT)):
        refused = run_cli("diagnose", "--logs", str(order[0]), "--logs", str(order[1]),
                          "--no-store", "--out", str(tmp_path / "refused"))
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "different speculative configs" in refused.stderr and "--by-file" in refused.stderr
    runs = [_json(run_cli("diagnose", "--logs", str(a), "--logs", str(b), "--by-file", "--json",
                          "--no-store", "--out", str(tmp_path / f"{i}")))["by_file"]
            for i, (a, b) in enumerate(((DRAFT, NGRAM), (NGRAM, DRAFT)))]
    for each in runs:
        by_source = {d["source"]: d for d in each}
        assert by_source[str(DRAFT)]["served"]["k"]["value"] == 4
        assert by_source[str(NGRAM)]["served"]["method"]["value"] == "ngram"
        assert "0.65" in by_source[str(NGRAM)]["signature"]["evidence"]
        # the self-draft's files accept every draft in the oracle: nothing to search for
        (cf,) = [e for e in by_source[str(DRAFT)]["experiments"]
                 if e["experiment"] == "oracle-counterfactual"]
        assert "accepts all 4 draft tokens" in cf["numbers"]["trials"]["space"]["not_searched"]
    signatures = [{d["source"]: d["signature"] for d in each} for each in runs]
    assert signatures[0] == signatures[1]


def test_one_file_of_two_engines_is_refused_and_diagnosed_apart_by_file(tmp_path):
    """llama-server lines then vLLM lines appended to one log (tests/sources/test_logs_engines
    .py says where each comes from), in both orders: refused naming the lines, or one
    diagnosis per engine's part with --by-file, the same in either order."""
    llama = VLLM_FIXTURES.parents[1] / "sources" / "fixtures" / "llamacpp" / \
        "pr24536_eagle3_per_position.log"
    found = []
    for i, order in enumerate(((llama, NGRAM), (NGRAM, llama))):
        log = tmp_path / f"appended-{i}.log"
        log.write_bytes(b"".join(p.read_bytes() for p in order))
        refused = run_cli("diagnose", "--logs", str(log), "--no-store",
                          "--out", str(tmp_path / f"refused-{i}"))
        assert refused.returncode == 2 and "several engines" in refused.stderr
        each = _json(run_cli("diagnose", "--logs", str(log), "--by-file", "--json",
                             "--no-store", "--out", str(tmp_path / f"out-{i}")))["by_file"]
        assert len(each) == 2
        found.append({d["source"].split("(")[-1]: d["signature"]["evidence"] for d in each})
    assert found[0] == found[1] and set(found[0]) == {"llamacpp)", "vllm)"}
    assert "0.65" in found[0]["vllm)"] and "0.80" in found[0]["llamacpp)"]


def test_by_file_needs_logs_alone(tmp_path):
    proc = run_cli("diagnose", "--url", "http://127.0.0.1:9", "--logs", str(NGRAM), "--by-file",
                   "--no-store", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--by-file" in proc.stderr


def test_engine_names_the_reader(tmp_path):
    # a vLLM log read as llama.cpp's has no window: refused as `logs --engine llamacpp` is
    proc = run_cli("diagnose", "--logs", str(NGRAM), "--engine", "llamacpp", "--no-store",
                   "--out", str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "llamacpp log lines found, but no speculative-decoding window" in proc.stderr
    # and the engine forced reads a two-engine file as that engine alone
    log = tmp_path / "appended.log"
    log.write_bytes(DRAFT.read_bytes() + (VLLM_FIXTURES.parents[1] / "sources" / "fixtures"
                                          / "llamacpp" / "pr24536_eagle3_per_position.log")
                    .read_bytes())
    d = _json(run_cli("diagnose", "--logs", str(log), "--engine", "vllm", "--json",
                      "--no-store", "--out", str(tmp_path / "forced")))
    assert d["served"]["k"]["value"] == 4


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


def test_a_target_file_that_is_not_gguf_is_bad_input(tmp_path):
    """--target/--draft take a model directory or the GGUF file llama-server reads; any other
    file is refused before anything is read or measured."""
    from tests.conftest import run_cli

    log = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp").glob("*.log"))[0]
    other = tmp_path / "model.gguf"
    other.write_bytes(b"PK\x03\x04 a zip, not GGUF")
    for flag in ("--target", "--draft"):
        r = run_cli("diagnose", "--logs", str(log), flag, str(other), "--no-store",
                    "-o", str(tmp_path / "out"))
        assert r.returncode == 2, r.stderr
        assert f"{flag} {other} is a file but not a GGUF file" in r.stderr
