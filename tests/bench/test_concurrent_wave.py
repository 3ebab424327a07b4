"""A concurrency pass puts its first wave in flight together, however slowly its worker threads
start, and says how many requests it really had in flight.

What the clinic met (up-eagle3-last-token-batch): on a busy 2-core machine a worker thread took
~80 ms to start and the lab's model answered a 48-token request in ~70 ms, so a pass "at
concurrency 8" sent each request after the previous one had ended: 1.8 requests in flight on
average, and a load-dependent fault measured as absent. Here the endpoint is a function that
takes as long as that model does (the question is when the client sends, not what a server
answers), and thread start-up is slowed the same way.
"""

from __future__ import annotations

import threading
import time

import pytest

from specdoctor.bench import measure as proto

ANSWER_S = 0.05      # a small model's whole request
THREAD_START_S = 0.04


def _answer(url, model, prompt, params, index=0, engine="vllm"):
    t0 = time.perf_counter()
    time.sleep(ANSWER_S)
    return {"usage": {"completion_tokens": 48}, "choices": [{"text": "x"}]}, time.perf_counter() - t0


@pytest.fixture
def slow_threads(monkeypatch):
    start = threading.Thread.start

    def slow(self, *a, **kw):
        time.sleep(THREAD_START_S)
        return start(self, *a, **kw)

    monkeypatch.setattr(threading.Thread, "start", slow)
    monkeypatch.setattr(proto, "complete", _answer)


def _pass(concurrency: int, n: int = 8) -> proto.Measurement:
    p = proto.MeasureParams(num_prompts=n, concurrency=concurrency, max_tokens=48)
    m = proto.Measurement(url="http://lab", model="lab", params=p)
    t0 = time.perf_counter()
    proto._run_concurrent(m, m.url, m.model, [f"p{i}" for i in range(n)], p, None)
    m.wall_s = time.perf_counter() - t0
    return m


def test_the_first_wave_leaves_together_when_threads_start_slowly(slow_threads):
    m = _pass(8)
    sent = sorted(r.sent_at for r in m.requests)
    # eight threads took 8 x 40 ms to come up; the requests left within a few ms of each other
    assert sent[-1] - sent[0] < 0.02, sent
    assert m.mean_in_flight > 6, m.mean_in_flight


def test_later_requests_refill_the_pool_without_waiting(slow_threads):
    m = _pass(4, n=12)
    assert len(m.requests) == 12 and [r.index for r in m.requests] == list(range(12))
    # three waves of four at 50 ms each, with four in flight most of the time
    assert m.mean_in_flight > 3, m.mean_in_flight


def test_in_flight_is_latency_over_the_span_and_falls_back_to_the_wall():
    assert proto.mean_in_flight([0.25] * 8, 0.30) == pytest.approx(8 * 0.25 / 0.30)
    assert proto.mean_in_flight([0.1, 0.1, 0.1], 0.3) == pytest.approx(1.0)   # one at a time
    assert proto.mean_in_flight([], 1.0) is None and proto.mean_in_flight([0.1], 0.0) is None
    p = proto.MeasureParams(num_prompts=2, concurrency=2)

    def rec(i, sent, lat):
        return proto.RequestRecord(i, "", 48, lat, None, sent_at=sent)

    # sent 1 s apart, each 1 s long: one in flight over the 2 s span, whatever the wall says
    m = proto.Measurement("u", "m", p, requests=[rec(0, 10.0, 1.0), rec(1, 11.0, 1.0)],
                          wall_s=5.0)
    assert m.mean_in_flight == pytest.approx(1.0)
    m.requests = [proto.RequestRecord(0, "", 48, 1.0, None), proto.RequestRecord(1, "", 48, 1.0, None)]
    assert m.mean_in_flight == pytest.approx(2 / 5.0)
