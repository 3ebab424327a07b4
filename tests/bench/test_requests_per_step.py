"""How many requests each engine step carried, from the server's own counters, for a drafter
that drafts at every step (EAGLE3) and for one that drafts at few (prompt lookup).

Recorded from real vLLM: tests/fixtures/vllm/lab-ngram-k3 (RECORDED.md: `vllm bench serve` at
concurrency 2 between metrics_1 and metrics_2) and tests/fixtures/vllm/load-passes.
"""

from __future__ import annotations

import json
from pathlib import Path

from specdoctor.bench import measure as proto
from specdoctor.experiments import common
from specdoctor.sources import prometheus

NGRAM = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "lab-ngram-k3"


def _scrape(phase: str, name: str) -> proto.Scrape:
    text = (NGRAM / name).read_text()
    return proto.Scrape(phase, 0.0, text, prometheus.parse_text(text))


def ngram_pass_at_concurrency_2() -> proto.Measurement:
    bench = json.loads((NGRAM / "bench_result.json").read_text())
    n = bench["num_prompts"]
    # the bench's requests: each answered max_tokens (ignore_eos), latencies as it timed them
    per = bench["total_output_tokens"] // n
    reqs = [proto.RequestRecord(i, "", per, lat, None) for i, lat in enumerate(bench["latencies"])]
    params = proto.MeasureParams(num_prompts=n, concurrency=bench["max_concurrency"],
                                 max_tokens=per)
    return proto.Measurement("(lab server)", "lab", params, requests=reqs,
                             scrapes=[_scrape("before", "metrics_1_before_bench.txt"),
                                      _scrape("after", "metrics_2_after_bench.txt")],
                             wall_s=bench["duration"])


def test_prompt_lookup_counts_its_batch_by_the_tokens_not_only_its_drafts():
    m = ngram_pass_at_concurrency_2()
    before, after = (s.reading for s in m.scrapes)
    steps = after.iterations - before.iterations
    drafts = after.profile.drafts - before.profile.drafts
    assert drafts / steps < 0.7          # the drafts alone: under half of concurrency 2
    # 384 tokens answered, 127 of them accepted drafts, over 145 engine steps
    assert 1.7 < m.requests_per_step < 1.8, m.requests_per_step
    assert common.load_reached(m)


def test_a_drafter_that_drafts_every_step_reads_as_before():
    from tests.experiments.test_load import passes

    for label, low, high in (("c=1", 0.9, 1.0), ("c=8 idle", 5.5, 6.5)):
        for m in passes("healthy-eagle3")[label]:
            assert low < m.requests_per_step < high, (label, m.requests_per_step)
