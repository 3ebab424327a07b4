"""The SQLite store: whole runs or nothing."""

import sqlite3
from pathlib import Path

import pytest

from specdoctor.store.db import Store

SCRAPE = (Path(__file__).resolve().parent.parent / "fixtures" / "vllm" / "lab-ngram-k3"
          / "metrics_3_final.txt").read_text()


def test_run_with_scrapes_and_requests_round_trips(tmp_path):
    s = Store(tmp_path / "s.db")
    rid = s.add_run(kind="measure", engine="vllm", target="http://h:1", params={"n": 1},
                    result={"total": {"drafts": 3}}, profile={"drafts": 3},
                    scrapes=[("before", 1.0, SCRAPE), ("after", 2.0, SCRAPE)],
                    requests=[{"index": 0, "prompt": "p", "completion_tokens": 4, "latency_s": 0.1}])
    row = s.run(rid)
    assert row.status == "ok" and row.result["total"]["drafts"] == 3
    assert [p for p, _, _ in s.scrapes(rid)] == ["before", "after"]
    assert s.scrapes(rid)[0][2] == SCRAPE
    assert [r.id for r in s.runs()] == [rid]


def test_a_failing_write_leaves_no_half_run(tmp_path):
    s = Store(tmp_path / "s.db")
    bad_request = {"index": 0, "prompt": "p"}  # missing fields → the insert fails mid-transaction
    with pytest.raises(KeyError):
        s.add_run(kind="measure", engine="vllm", target="t", params={}, result={}, profile=None,
                  scrapes=[("before", 1.0, SCRAPE)], requests=[bad_request])
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM scrapes").fetchone()[0] == 0


def test_failed_runs_are_kept_with_their_error(tmp_path):
    s = Store(tmp_path / "s.db")
    rid = s.add_run(kind="measure", engine="vllm", target="t", params={}, result={"requests": 2},
                    profile=None, status="failed", error="server died")
    assert (s.run(rid).status, s.run(rid).error) == ("failed", "server died")


def test_requests_read_back_in_request_order_with_their_profiles(tmp_path):
    s = Store(tmp_path / "s.db")
    prof = {"drafts": 10, "accepted_per_position": [7, 3]}
    rid = s.add_run(kind="measure", engine="vllm", target="http://h:1", params={}, result={},
                    profile=None,
                    requests=[{"index": 1, "prompt": "b", "completion_tokens": 5, "latency_s": 0.2,
                               "profile": None},
                              {"index": 0, "prompt": "a", "completion_tokens": 4, "latency_s": 0.1,
                               "profile": prof, "per_step": [[2, 1], [3, 3]]}])
    other = s.add_run(kind="measure", engine="vllm", target="x", params={}, result={},
                      profile=None, requests=[{"index": 0, "prompt": "z", "completion_tokens": 1,
                                               "latency_s": 0.0}])
    reqs = s.requests(rid)
    assert [(r.index, r.prompt) for r in reqs] == [(0, "a"), (1, "b")]
    assert reqs[0].profile == prof and reqs[0].per_step == [[2, 1], [3, 3]]
    assert reqs[1].profile is None and reqs[1].completion_tokens == 5
    assert [r.prompt for r in s.requests(other)] == ["z"]
    assert s.requests(999) == []
