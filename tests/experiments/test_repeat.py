"""repeat-ab and the ``drifting`` class it feeds, on two greedy passes over the same prompts
recorded on real vLLM (fixtures/repeat_passes.json, whose ``about`` says how): a server whose
prefix-cache hits leave the drafter's KV unwritten accepts less the second time; the same
server without the fault, or with the fault where nothing is ever found in the cache, accepts
the same (one prompt flips at a near-tie)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench.measure import Measurement, MeasureParams, RequestRecord
from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import ledger as L
from specdoctor.diagnose.references import Reference
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context, Measured
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.repeat import RepeatAB, fall

FIXTURE = Path(__file__).with_name("fixtures") / "repeat_passes.json"
N = 8   # the prompts a diagnosis measures by default


def passes(name: str, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    data = json.loads(FIXTURE.read_text())
    assert "benchmarks/clinic/measure.py" in data["about"]
    p = data["passes"][name]
    return (np.array(p["greedy"][:n], dtype=np.float64),
            np.array(p["greedy#2"][:n], dtype=np.float64))


def measurement(units: np.ndarray) -> Measurement:
    m = Measurement("http://127.0.0.1:0", "m", MeasureParams(num_prompts=len(units)))
    for i, row in enumerate(units.astype(int).tolist()):
        d, acc = row[0], tuple(row[1:])
        m.requests.append(RequestRecord(i, f"p{i}", 64, 0.1, AcceptanceProfile(
            d, d * len(acc), sum(acc), acc, k=len(acc))))
    tot = units.sum(axis=0).astype(int).tolist()
    m.total = AcceptanceProfile(tot[0], tot[0] * (len(tot) - 1), sum(tot[1:]), tuple(tot[1:]),
                                k=len(tot) - 1)
    return m


@pytest.mark.parametrize("n", [N, 16])
def test_a_prefix_hit_that_loses_the_drafters_kv_falls_on_the_second_pass(n):
    r = rules.repeat_fall(*passes("fault", n))
    assert rules.repeat_fell(r), r
    assert r.first == 4.0 and r.again < 0.9 * r.first and r.rose == 0 and r.fell >= 3


@pytest.mark.parametrize("name", ["healthy", "fault-block128"])
@pytest.mark.parametrize("n", [N, 16])
def test_a_server_that_keeps_nothing_between_requests_does_not(name, n):
    r = rules.repeat_fall(*passes(name, n))
    assert not rules.repeat_fell(r), r
    assert r.fell <= 1 and r.rose == 0


def test_one_prompt_alone_is_not_a_fall_however_large():
    """A single prompt that loses all its acceptance (as a near-tie flip early in a greedy
    text can take it elsewhere) is beyond the margin and the counts, yet one prompt: not a
    fall."""
    first, _ = passes("healthy")
    again = first.copy()
    again[0, 1:] = 0
    r = rules.repeat_fall(first, again)
    assert r.fell == 1 and r.gain.gain >= r.gain.margin() and r.gain.counts_significant
    assert not rules.repeat_fell(r)


def test_the_fall_makes_the_signature_drifting_and_repeat_ab_confirms_uptime_drift(tmp_path):
    first, again = passes("fault")
    ctx = Context(tmp_path, measured=Measured(greedy=measurement(first), greedy_again=measurement(again)))
    ctx.started_fresh = True
    r = fall(ctx)
    assert r is not None and rules.repeat_fell(r)
    oracle = Reference("oracle", "oracle", (1.0, 1.0, 1.0, 1.0), tolerance=0.05)
    sig = classify(Facts(ctx.measured.greedy.total, oracle, method="draft_model", k=4,
                         repeat=r))
    assert sig.cls == "drifting", sig
    led = L.build(sig, C.load(), 2.0)
    assert led.entry("uptime-drift") is not None
    assert "repeat-ab" in C.load().deciders("uptime-drift")
    assert RepeatAB().unavailable(ctx) is None
    (f,) = RepeatAB().run(ctx, ("uptime-drift",)).findings
    assert f.verdict is Verdict.CONFIRMED and f.basis == "comparison", f
    assert "restart gives it back" in f.evidence
    # sized: the fall from the first pass to the second, with the paired interval over prompts
    r = fall(ctx)
    assert f.size is not None and f.size.loss == pytest.approx(r.first - r.again)
    assert f.size.loss > 0
    assert (f.size.low, f.size.high) == (r.gain.low, r.gain.high)
    # the same measurement on the healthy server: healthy, and repeat-ab confirms nothing
    first, again = passes("healthy")
    ctx = Context(tmp_path, measured=Measured(greedy=measurement(first), greedy_again=measurement(again)))
    sig = classify(Facts(ctx.measured.greedy.total, oracle, method="draft_model", k=4,
                         repeat=fall(ctx)))
    assert "drifting" not in (sig.cls, *sig.also), sig
    (f,) = RepeatAB().run(ctx, ("uptime-drift",)).findings
    assert f.verdict is Verdict.INCONCLUSIVE


def test_without_a_second_pass_repeat_ab_says_why(tmp_path):
    first, _ = passes("fault")
    ctx = Context(tmp_path, measured=Measured(greedy=measurement(first)))
    assert fall(ctx) is None
    assert "twice" in (RepeatAB().unavailable(ctx) or "")
