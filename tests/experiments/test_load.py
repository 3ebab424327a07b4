"""Whether a concurrency pass had its load, and what concurrency-ab decides from it, on passes
recorded from real vLLM (tests/fixtures/vllm/load-passes/RECORDED.md says how).

up-eagle3-last-token-batch is the clinic's EAGLE3 head with a fault that bites only when
several requests share an engine step; healthy-eagle3 is the same head without it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench import measure as proto
from specdoctor.experiments import common
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context, Measured
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.relaunch import ConcurrencyAB
from specdoctor.sources import prometheus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "load-passes"


def passes(case: str) -> dict[str, list[proto.Measurement]]:
    out: dict[str, list[proto.Measurement]] = {}
    for d in json.loads((FIXTURES / f"{case}.json").read_text()):
        params = proto.MeasureParams(**d["params"])
        t = d["total"]
        total = AcceptanceProfile(t["drafts"], t["draft_tokens"], t["accepted_tokens"],
                                  tuple(t["accepted_per_position"]), t["k"])
        reqs = [proto.RequestRecord(r["index"], "", r["completion_tokens"], r["latency_s"],
                                    None, sent_at=s)
                for r, s in zip(d["per_request"], d["sent_at"])]
        scrapes = [proto.Scrape(phase, 0.0, text, prometheus.parse_text(text))
                   for phase, text in d["scrapes"].items()]
        m = proto.Measurement(d["url"], d["model"], params, scrapes=scrapes, requests=reqs,
                              total=total, wall_s=d["wall_s"])
        out.setdefault(d["label"], []).append(m)
    return out


FAULT = "up-eagle3-last-token-batch"
HEALTHY = "healthy-eagle3"


@pytest.mark.parametrize("case", [FAULT, HEALTHY])
def test_the_servers_steps_say_how_many_requests_ran_together(case):
    p = passes(case)
    for m in p["c=1"] + p["c=1 again"]:
        # one request at a time: a little under one per step (prefill steps carry no draft)
        assert 0.5 < m.requests_per_step <= 1.0, m.requests_per_step
    for m in p["c=8 idle"]:
        assert m.requests_per_step >= rules.LOAD_IN_FLIGHT_SHARE * 8, m.requests_per_step
        assert common.load_reached(m)


def _ctx(tmp_path, p, c8: proto.Measurement) -> Context:
    return Context(workdir=tmp_path, measured=Measured(
        greedy=p["c=1"][0], greedy_again=p["c=1 again"][0], loaded=c8))


def test_the_fault_is_confirmed_at_load(tmp_path):
    p = passes(FAULT)
    r = ConcurrencyAB().run(_ctx(tmp_path, p, p["c=8 idle"][0]), ("load-dependent",))
    f = r.findings[0]
    assert f.verdict is Verdict.CONFIRMED, f.evidence
    # sized: what the same prompts lose at concurrency 8 against 1, as the evidence reads them
    one, eight = (common.apd(r.curves[c]) for c in ("c=1", "c=8"))
    assert f.size is not None and f.size.loss == pytest.approx(one - eight) and f.size.loss > 0
    assert f.size.against is not None and f.size.against.reference == pytest.approx(one)


def test_the_healthy_head_is_excluded_at_load(tmp_path):
    p = passes(HEALTHY)
    r = ConcurrencyAB().run(_ctx(tmp_path, p, p["c=8 idle"][0]), ("load-dependent",))
    assert r.findings[0].verdict is Verdict.EXCLUDED, r.findings[0].evidence


def test_a_pass_whose_requests_never_ran_together_excludes_nothing(tmp_path):
    # What the server saw in the clinic's failing pass: the requests one at a time. The c=1
    # pass is exactly that; sent "at concurrency 8" it would read the same.
    p = passes(FAULT)
    alone = dataclasses.replace(p["c=1 again"][0],
                                params=dataclasses.replace(p["c=1 again"][0].params,
                                                           concurrency=8))
    r = ConcurrencyAB().run(_ctx(tmp_path, p, alone), ("load-dependent",))
    f = r.findings[0]
    assert f.verdict is Verdict.INCONCLUSIVE and "did not run together" in f.evidence, f.evidence


def _as_c8(m: proto.Measurement) -> proto.Measurement:
    return dataclasses.replace(m, params=dataclasses.replace(m.params, concurrency=8))


def test_a_pass_without_its_load_is_taken_again_longer_and_compared_at_that_length(
        tmp_path, monkeypatch):
    # The passes the server gives, in turn: one that ran one request at a time (as the c=1
    # pass did), then one that ran together; then the concurrency-1 pass at the longer length.
    p = passes(FAULT)
    given = [_as_c8(p["c=1"][0]), p["c=8 idle"][0], p["c=1 again"][0]]
    asked: list[proto.MeasureParams] = []

    def serve(ctx, url, params):
        asked.append(params)
        return given[len(asked) - 1]

    monkeypatch.setattr(common, "measure_url", serve)
    first = proto.MeasureParams(num_prompts=8, concurrency=8, max_tokens=48, suite="code")
    loaded = common.measure_loaded(Context(workdir=tmp_path), "http://lab", first)
    assert [(a.concurrency, a.max_tokens) for a in asked] == [
        (8, 48), (8, 48 * rules.LOAD_LONGER), (1, 48 * rules.LOAD_LONGER)]
    assert loaded.reached and loaded.measurement is given[1] and loaded.reference is given[2]
    assert loaded.seen[0] < 1 and loaded.seen[1] > 4, loaded.seen


def test_a_load_never_reached_keeps_the_pass_asked_for_and_says_so(tmp_path, monkeypatch):
    p = passes(FAULT)
    alone = _as_c8(p["c=1"][0])
    monkeypatch.setattr(common, "measure_url", lambda ctx, url, params: alone)
    first = proto.MeasureParams(num_prompts=8, concurrency=8, max_tokens=48, suite="code")
    loaded = common.measure_loaded(Context(workdir=tmp_path), "http://lab", first)
    assert not loaded.reached and loaded.reference is None
    assert len(loaded.seen) == rules.LOAD_PASSES
    assert "requests per engine step: 0.9" in loaded.words(), loaded.words()
