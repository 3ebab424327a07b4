"""The done-when demo, small: one `specdoctor sweep --lab` benchmarks ngram and draft_model
against the spec-off baseline on real vLLM (3 boots, two at a time through --devices), and
writes the report. The checks are the lab's known truths: a draft model that is a copy of the
target accepts every greedy draft; a spec-off server has no acceptance; the counter deltas of
a cell equal the sum of its requests' own metrics (nothing else talks to these servers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("sweep")
    db = tmp / "store.db"
    proc = run_cli("sweep", "--lab", "--method", "ngram,draft_model", "--k", "2",
                   "--devices", "0 1", "-n", "3", "--suite", "code", "--sampling", "greedy",
                   "-c", "1,2", "--max-tokens", "16", "--ready-timeout", "1500", "--db", str(db),
                   "--report-dir", str(tmp / "report"), "--json", timeout=3000)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    out["db"] = db
    return out


def _rows(out: dict, config: str) -> list[dict]:
    return [r for r in out["rows"] if r["config"] == config]


def test_every_cell_of_three_configurations_ran(sweep):
    assert sweep["status"] == "ok"
    assert [c["label"] for c in sweep["configs"]] == ["spec-off", "ngram:k=2", "draft_model:k=2"]
    assert len(sweep["rows"]) == 3 * 2
    assert all(r["status"] == "ok" and r["failures"] == {} for r in sweep["rows"])


def test_baseline_has_no_speculation_and_others_report_speedup(sweep):
    for r in _rows(sweep, "spec-off"):
        assert r["profile"] is None and r["tok_s"]["value"] > 0
        assert "--speculative-config" not in r["command"]
        assert "--per-request-spec-decode-metrics" not in r["command"]
    for cfg in ("ngram:k=2", "draft_model:k=2"):
        for r in _rows(sweep, cfg):
            assert r["speedup"] is not None and r["speedup"] > 0
            assert '"num_speculative_tokens": 2' in r["command"]


def test_copy_drafter_accepts_everything_and_counters_match_requests(sweep):
    from specdoctor.store.bench import BenchStore

    for r in _rows(sweep, "draft_model:k=2"):
        p = r["profile"]
        assert p["per_position"] == [1.0, 1.0]
        assert p["mean_acceptance_length"] == 3.0
        assert r["accepted_histogram"][:2] == [0, 0] and r["accepted_histogram"][2] > 0
    store = BenchStore(sweep["db"])
    try:
        for cell in store.cells(sweep["run_id"]):
            if cell.config == "spec-off":
                continue
            spec = [q["spec"] for q in cell.result["requests"]]
            assert all(spec), "every request carries its own spec-decode metrics"
            assert sum(s["num_spec_steps"] for s in spec) == cell.result["profile"]["drafts"]
            assert sum(s["num_accepted_draft_tokens"] for s in spec) == \
                cell.result["profile"]["accepted_tokens"]
    finally:
        store.close()


def test_two_configurations_ran_side_by_side_on_their_own_devices(sweep):
    from specdoctor.store.bench import BenchStore

    store = BenchStore(sweep["db"])
    try:
        launches = {}
        for cell in store.cells(sweep["run_id"]):
            r = cell.result
            launches[cell.config] = (r["devices"], r["launched_at"], r["ready_at"],
                                     r["env"]["CUDA_VISIBLE_DEVICES"])
    finally:
        store.close()
    (d0, l0, r0, e0), (d1, l1, r1, e1) = launches["spec-off"], launches["ngram:k=2"]
    assert {d0, d1} == {"0", "1"} and (e0, e1) == (d0, d1)
    assert l1 < r0 and l0 < r1  # both were booting at the same time
    # the third took the set that freed first, after one of the first two finished
    d2, l2, _, _ = launches["draft_model:k=2"]
    assert d2 in ("0", "1") and l2 > min(r0, r1)


def test_report_has_the_table_curves_and_exact_commands(sweep):
    md = Path(sweep["report"]["markdown"]).read_text()
    html = Path(sweep["report"]["html"]).read_text()
    for cfg in sweep["configs"]:
        assert cfg["label"] in md
    assert "## Per-position acceptance" in md and "## Speedup against the spec-off baseline" in md
    assert "vllm.entrypoints.openai.api_server" in md
    assert html.count("data:image/png;base64,") >= 3
    assert sweep["verdicts"] and all(v["command"] for v in sweep["verdicts"])
