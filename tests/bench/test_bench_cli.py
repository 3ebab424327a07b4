"""`specdoctor bench --url` end to end against the local streaming server (vLLM's wire format,
see stream_server.py): the matrix, acceptance from counter deltas with per-request intervals,
failures counted per cell, a dying server, --resume, datasets, chat, --json and the report."""

import json
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from specdoctor.launch import http_ok
from tests.bench.stream_server import running
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    with ExitStack() as stack:
        yield lambda *args: stack.enter_context(running(*args))


def _bench(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = run_cli("bench", *args, "--json", timeout=120)
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else {})


def test_matrix_rows_acceptance_and_latency(server, tmp_path: Path):
    url = server("--k", "3", "--pattern", "3,1,0,2", "--step-ms", "1")
    proc, out = _bench("--url", url, "-n", "5", "--max-tokens", "24", "--suite", "code,essay",
                       "--sampling", "greedy", "-c", "1,4", "--report-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    rows = out["rows"]
    assert sorted(r["cell"] for r in rows) == ["code/greedy/c1", "code/greedy/c4",
                                               "essay/greedy/c1", "essay/greedy/c4"]
    for r in rows:
        p = r["profile"]
        # 24 tokens per request in steps accepting 3,1,0,2,3,1,0,2,3 of k=3 (4+2+1+3+4+2+1+3+4)
        assert r["accepted_histogram"] == [5 * 2, 5 * 2, 5 * 2, 5 * 3]
        assert (p["drafts"], p["draft_tokens"]) == (5 * 9, 5 * 27)
        assert p["accepted_tokens"] == 5 * 15
        # 5 requests a cell: below the units a 95% bootstrap interval needs, said with the reason
        assert p["ci95"] is None and "5 requests, fewer than the 15" in p["ci95_unavailable"]
        assert r["failures"] == {} and r["status"] == "ok"
        assert r["tok_s"]["value"] > 0 and r["ttft_p50_s"] is not None and r["tpot_p50_s"] is not None
        assert 0 < r["itl_p50_s"] < 1  # 1 ms steps: gaps between events, not whole requests
    assert Path(out["report"]["html"]).is_file() and Path(out["report"]["markdown"]).is_file()


def test_failures_are_counted_and_finished_requests_kept(server):
    # arrivals: 0 = warm-up of cell 1; 1..4 its requests
    url = server("--http-500-at", "2", "--empty-at", "3")
    proc, out = _bench("--url", url, "-n", "4", "--max-tokens", "8", "--suite", "code",
                       "--sampling", "greedy", "-c", "1", "--no-report")
    assert proc.returncode == 0, proc.stderr
    (row,) = out["rows"]
    assert row["failures"] == {"http": 1, "empty": 1}
    assert row["status"] == "ok"
    assert row["profile"]["drafts"] > 0  # the two finished requests are measured


def test_dying_server_fails_the_cell_keeps_its_requests_and_resume_finishes(server, tmp_path: Path):
    db = tmp_path / "s.db"
    # arrivals 0-4: cell 1 (warm-up + 4); 5, 6: cell 2's warm-up and first request; the
    # server exits while streaming arrival 7
    url = server("--die-at", "7")
    port = url.rsplit(":", 1)[1]
    args = ("-n", "4", "--max-tokens", "8", "--suite", "code,essay,long", "--sampling", "greedy",
            "-c", "1", "--no-report", "--db", str(db))
    proc, out = _bench("--url", url, *args)
    assert proc.returncode == 3
    rows = {r["cell"]: r for r in out["rows"]}
    first, second, third = rows["code/greedy/c1"], rows["essay/greedy/c1"], rows["long/greedy/c1"]
    assert first["status"] == "ok"
    assert second["status"] == "failed" and "stopped answering" in second["errors"][0]
    assert "1 of 4 requests finished" in second["errors"][0]
    assert second["profile"]["drafts"] == 4  # the finished request is kept (4 steps of 8 tokens)
    assert third["status"] == "failed" and "earlier cell" in third["errors"][0]
    # the server is back (same port, fresh counters): --resume runs only the failed cells
    back = subprocess.Popen([sys.executable, "-m", "tests.bench.stream_server", "--port", port],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if http_ok(url + "/v1/models"):
                break
            time.sleep(0.05)
        proc2 = run_cli("bench", "--resume", str(out["run_id"]), "--db", str(db), "--json",
                        "--no-report", timeout=120)
        assert proc2.returncode == 0, proc2.stderr
        out2 = json.loads(proc2.stdout)
        assert out2["run_id"] == out["run_id"] and out2["status"] == "ok"
        assert [r["status"] for r in out2["rows"]] == ["ok"] * 3
        metrics = run_cli("metrics", url + "/metrics", "--json", "--no-store")
        assert metrics.returncode == 0, metrics.stderr
        # 2 cells × (warm-up + 4 requests) × 4 drafts each: cell 1 was not run again
        assert json.loads(metrics.stdout)["total"]["drafts"] == 2 * 5 * 4
    finally:
        back.kill()
        back.wait()


def test_dataset_categories_become_rows_and_turns_follow_answers(server, tmp_path: Path):
    ds = tmp_path / "question.jsonl"
    ds.write_text("\n".join(json.dumps(x) for x in [
        {"question_id": 1, "category": "writing", "turns": ["Write a haiku.", "Now make it sadder."]},
        {"question_id": 2, "category": "coding", "turns": ["def add(a, b):"]},
        {"question_id": 3, "category": "writing", "turns": ["Describe rain.", "Shorter."]},
    ]) + "\n")
    url = server()
    proc, out = _bench("--url", url, "--dataset", str(ds), "-n", "2", "--max-tokens", "6",
                       "--sampling", "greedy", "-c", "1", "--endpoint", "chat", "--no-report")
    assert proc.returncode == 0, proc.stderr
    rows = {r["cell"]: r for r in out["rows"]}
    assert set(rows) == {"writing/greedy/c1", "coding/greedy/c1"}
    assert rows["writing/greedy/c1"]["profile"]["drafts"] > 0


def test_bad_dataset_and_bad_arguments_name_the_fix(tmp_path: Path):
    ds = tmp_path / "q.jsonl"
    ds.write_text('{"category": "x", "turns": "ok"}\nnot json\n')
    proc = run_cli("bench", "--url", "http://127.0.0.1:9", "--dataset", str(ds))
    assert proc.returncode == 2 and "q.jsonl:2 is not JSON" in proc.stderr
    proc = run_cli("bench", "--url", "http://127.0.0.1:9", "--sampling", "hot")
    assert proc.returncode == 2 and "unknown sampling 'hot'" in proc.stderr
    proc = run_cli("bench", "--url", "http://127.0.0.1:9", "--baseline")
    assert proc.returncode == 2 and "--launch" in proc.stderr
    proc = run_cli("bench")
    assert proc.returncode == 2 and "exactly one of" in proc.stderr
    proc = run_cli("bench", "--url", "http://127.0.0.1:9", "-c", "1")
    assert proc.returncode == 3 and "cannot reach http://127.0.0.1:9" in proc.stderr
    assert "Traceback" not in proc.stderr
