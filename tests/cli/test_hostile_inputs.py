"""Hostile input, class by class: each ends in the promised exit status with a message that
names the problem (2: the file, flag or value and its limit; 3: what the server answered),
never 70, never a hang. A hostile HTTP server runs on loopback (tests/cli/hostile_http.py).

The commands run in-process as the console script runs them (tests/cli/fuzz.py ``run``), so
the classes fit in CI's time; `logs | head` runs in a real shell pipeline.
benchmarks/hostile_sweep.py runs the same classes as separate processes with their memory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdoctor.bench import http
from specdoctor.errors import InputError, TargetError
from specdoctor.textfile import MAX_CONFIG, read_limited
from tests.cli import fuzz
from tests.cli.hostile_http import HostileServer, metrics_series

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "fixtures" / "vllm" / "lab-draft_model-k4" / "server.log"


def cli(tmp_path: Path, *argv: str) -> tuple[int | None, str]:
    code, tb, stderr = fuzz.run(list(argv), tmp_path)
    assert tb is None, tb
    assert fuzz.INTERNAL_MARK not in stderr, stderr
    return code, stderr


# -- a hostile server ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode, needle", [
    ("garbage", "answered no valid HTTP: BadStatusLine"),
    ("http09", "answered no valid HTTP: BadStatusLine"),
    ("huge-header", "answered no valid HTTP: LineTooLong"),
    ("endless-header", "got more than 100 headers"),
    ("bad-length", "no speculative-decoding metrics in http://"),
    ("huge-body", "answered more than 67,108,864 bytes"),
])
def test_metrics_from_a_hostile_server_is_the_servers_fault(tmp_path, mode, needle):
    with HostileServer(mode, max_s=10) as url:
        code, err = cli(tmp_path, "metrics", url + "/metrics", "--no-store")
    assert code == 3 and needle in err, err


@pytest.mark.parametrize("mode, needle", [
    ("garbage", "answered no valid HTTP"),
    ("nested-json", "/v1/models did not list a model"),
])
def test_measure_against_a_hostile_server_is_the_servers_fault(tmp_path, mode, needle):
    with HostileServer(mode, max_s=10) as url:
        code, err = cli(tmp_path, "measure", "--url", url, "-n", "1", "--no-store")
    assert code == 3 and needle in err, err


def test_a_trickling_server_is_cut_at_the_overall_deadline():
    # one byte every 0.2 s: no single read waits past its timeout, the whole answer never comes
    with HostileServer("trickle", max_s=10) as url:
        t0 = time.monotonic()
        with pytest.raises(TargetError, match="gave no whole answer within 1 s"):
            http.get_text(url + "/metrics", timeout_s=1)
        assert time.monotonic() - t0 < 4


def test_nested_json_from_a_completion_is_the_servers_fault():
    with HostileServer("nested-json", max_s=10) as url:
        with pytest.raises(TargetError, match="answered no JSON \\(RecursionError"):
            http.post_json(url + "/v1/completions", {"prompt": "x"}, timeout_s=5)


def test_a_streamed_answer_is_bounded():
    import asyncio

    from specdoctor.bench.client import Request, run_requests

    for mode, detail in (("garbage", "no HTTP status line"), ("endless-header", "100 headers"),
                         ("bad-length", "Content-Length of -40"), ("huge-body", "past 1,048,576")):
        with HostileServer(mode, max_s=10) as url:
            (o,), _ = asyncio.run(run_requests(url, [Request(0, "/v1/completions", {})], 1, 5))
        assert o.error == "connection" and detail in o.detail, (mode, o.detail)


@pytest.mark.parametrize("url, needle", [
    ("http://127.0.0.1:9/\r\nX-Evil: 1", "holds a control character"),
    ("http://[::1/metrics", "cannot be read: Invalid IPv6 URL"),
])
def test_a_url_that_cannot_be_sent_is_bad_input(tmp_path, url, needle):
    code, err = cli(tmp_path, "metrics", url)
    assert code == 2 and needle in err, err


# -- files ----------------------------------------------------------------------------------------

@pytest.fixture
def sparse(tmp_path: Path) -> Path:
    p = tmp_path / "sparse.json"
    with open(p, "wb") as fh:
        fh.truncate(3500 << 20)  # 3.5 GB, no disk used
    return p


@pytest.mark.parametrize("argv, needle", [
    (["gate", "--baseline", "{f}", "--url", "http://127.0.0.1:9"], "--baseline {f} holds 3,500 MiB"),
    (["diagnose", "--logs", str(LOG), "--reference", "{f}", "--no-store"], "--reference {f} holds"),
    (["bench", "--dataset", "{f}", "--url", "http://127.0.0.1:9"], "the limit of 256 MiB for a dataset"),
    (["kernels", "check", "--suite", "{f}"], "past the limit of 64 MiB for a kernel suite"),
    (["metrics", "{f}", "--no-store"], "past the limit of 64 MiB for a /metrics body"),
])
def test_a_huge_file_is_refused_by_its_size_before_it_is_read(tmp_path, sparse, argv, needle):
    code, err = cli(tmp_path, *[a.replace("{f}", str(sparse)) for a in argv])
    assert code == 2 and needle.replace("{f}", str(sparse)) in err, err


def test_the_bounded_reader(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    assert read_limited(fifo, "suite") == b""  # nobody writes to it: empty at once, no hang
    assert time.monotonic() - t0 < 2
    small = tmp_path / "s.json"
    small.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="holds 101 bytes, past the limit of 100 bytes"):
        read_limited(small, "config", 100, "--config")
    assert read_limited(small, "config", MAX_CONFIG) == b"x" * 101
    with pytest.raises(InputError, match="not a regular file or a pipe"):
        read_limited(Path("/dev/zero"), "config")


def test_a_fifo_with_no_writer_is_an_empty_log_not_a_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv, needle in ((["logs", str(fifo), "--no-store"], "no speculative-decoding metrics"),
                         (["metrics", str(fifo), "--no-store"], "no speculative-decoding metrics")):
        code, err = cli(tmp_path, *argv)
        assert code == 2 and needle in err, err


def test_a_metrics_dump_of_many_series_is_refused_before_it_is_parsed(tmp_path):
    dump = tmp_path / "m.txt"
    with open(dump, "wb") as fh:
        for block in metrics_series(20_000):
            fh.write(block)
    code, err = cli(tmp_path, "metrics", str(dump), "--no-store")
    assert code == 2 and "20,003 vllm:spec_decode_* samples, past the limit of 10,000" in err, err


# -- logs -----------------------------------------------------------------------------------------

def test_one_log_named_through_links_is_not_counted_twice(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(LOG.read_bytes())
    (tmp_path / "sym.log").symlink_to("a.log")
    os.link(log, tmp_path / "hard.log")
    (tmp_path / "sub").mkdir()
    for other in ("sym.log", "hard.log", "sub/../a.log"):
        code, err = cli(tmp_path, "logs", str(log), str(tmp_path / other), "--no-store")
        assert code == 2 and "are one file (a link or another path to it)" in err, err
    code, _ = cli(tmp_path, "logs", str(log), "--no-store")
    assert code == 0


def test_a_number_past_pythons_digit_limit_is_a_skipped_line(tmp_path):
    log = tmp_path / "d.log"
    log.write_text(LOG.read_text().replace("Accepted: 136 tokens",
                                           "Accepted: " + "9" * 100_000 + " tokens", 1))
    code, err = cli(tmp_path, "logs", str(log), "--no-store", "--json")
    assert code == 0, err
    from specdoctor.sources.logs import read_logs

    r = read_logs([str(log)])
    assert r.reading.skipped.count == 1
    assert "a number of 100,000 digits" in r.reading.skipped.examples[0]


def test_logs_into_head_exits_0_quietly(tmp_path):
    big = tmp_path / "big.log"
    big.write_text(LOG.read_text() * 200)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m specdoctor logs {big} --no-store --windows 1000 "
                       "| head -1; exit ${PIPESTATUS[0]}"],
        capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("windows (600")


# -- suites, values, stores -----------------------------------------------------------------------

@pytest.mark.parametrize("suite, needle", [
    ('[{"name": "x", "seqs": [[Infinity, 1]]}]', "are not [ctx, n_q] pairs of whole numbers"),
    ('[{"name": "x", "seqs": [[16, 1]], "seed": 1e30}]', "field 'seed' is 1e+30, not int"),
    ('[{"name": "x", "seqs": [[16, 1]], "seed": 100000000000000000000}]', "seed 1e+20 is outside"),
    ('[{"name": "x", "seqs": [[16, 1]], "causal": "false"}]', "field 'causal' is 'false', not bool"),
    (json.dumps([{"seqs": [[1, 1]]}] * 1001), "lists 1,001 cases, past the limit of 1,000"),
])
def test_a_kernel_suite_is_checked_strictly(tmp_path, suite, needle):
    path = tmp_path / "suite.json"
    path.write_text(suite)
    code, err = cli(tmp_path, "kernels", "check", "--suite", str(path))
    assert code == 2 and needle in err, err


@pytest.mark.parametrize("argv, needle", [
    (["measure", "--url", "http://127.0.0.1:9", "--temperature", "nan"], "'nan' is not a finite number"),
    (["bench", "--url", "http://127.0.0.1:9", "--top-p", "inf"], "--top-p"),
    (["kernels", "check", "--suite", "smoke", "--device", "evil"], "'evil' is not one of"),
    (["cache", "ab", "--port", "18123", "--", "no-such-server-cmd"], "no command 'no-such-server-cmd'"),
])
def test_a_value_that_cannot_be_used_is_bad_input(tmp_path, argv, needle):
    code, err = cli(tmp_path, *argv)
    assert code == 2 and needle in err, err


def test_a_store_of_another_schema_is_bad_input(tmp_path):
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE runs (x)")
    conn.commit()
    conn.close()
    code, err = cli(tmp_path, "logs", str(LOG), "--db", str(db))
    assert code == 2 and "is of another schema: its table runs has no column" in err, err


def test_recon_into_proc_is_bad_input(tmp_path):
    code, err = cli(tmp_path, "recon", "extract", str(ROOT / "src"), "-o", "/proc/specdoctor-x")
    assert code == 2 and "cannot make the output folder /proc/specdoctor-x" in err, err
