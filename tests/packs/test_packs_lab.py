"""Probe packs on a real lab server: the DFlash control drafter served with two packs stacked,
``raise-everywhere`` (every probe fails on purpose) and ``startup``. The server is the session's
``dflash_pos0_with_packs`` (tests/conftest.py), which tests/lab/drafters/test_drafters_live.py
also measures: one boot for both.

The server must still serve, with exactly the acceptance the control drafter was built for
(position 0 always accepted, later positions never), and the startup pack must print what the
engine built (the speculative config, the draft's rope and per-layer causality) and one line per
verify step whose counts add up to the server's own counters.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from specdoctor.bench import measure as proto
from specdoctor.bench.prompts import take
from specdoctor.packs import run
from specdoctor.sources import prometheus

pytestmark = pytest.mark.lab
K = 4


@pytest.fixture(scope="module")
def served(dflash_pos0_with_packs):
    info = dflash_pos0_with_packs
    assert info["k"] == K and info["patches"] == ["raise-everywhere", "startup"]
    before = _counters(info["url"])
    m = proto.run(info["url"], take("code", 4), proto.MeasureParams(num_prompts=4,
                                                                     max_tokens=24))
    after = _counters(info["url"])
    lines = run.collect(Path(info["log"]).read_text(errors="replace"))
    return {"info": info, "measurement": m, "before": before, "after": after, "lines": lines}


def _counters(url: str):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return prometheus.parse_text(r.read().decode()).profile


def _by(lines, name):
    return [ln.data for ln in lines if ln.probe == name]


def test_server_serves_with_the_designed_acceptance(served):
    m = served["measurement"]
    assert m.error is None and len(m.requests) == 4
    t = m.total
    assert t is not None and t.drafts and t.drafts > 20
    # the pos0 control, unchanged: position 0 always, the later ones never
    assert list(t.accepted_per_position) == [t.drafts] + [0] * (K - 1)


def test_startup_lines_show_what_the_engine_built(served):
    lines = served["lines"]
    spec = _by(lines, "speculative-config")
    assert spec and spec[0]["method"] == "dflash" and spec[0]["k"] == K
    assert spec[0]["draft_architectures"] == ["DFlashDraftModel"]
    assert spec[0]["draft_rope"]["rope_theta"] == 10000.0
    assert _by(lines, "dflash-layer") == [{"layer": 0, "window": None, "causal": False}]
    ropes = _by(lines, "rope")
    assert ropes and all(r["rope_parameters"]["rope_theta"] == 10000.0 for r in ropes)
    assert {a["attn_type"] for a in _by(lines, "attention")} == {"decoder"}


def test_per_step_lines_add_up_to_the_servers_counters(served):
    # every step since start-up (warm-up included) against the counters since start-up
    steps = _by(served["lines"], "accepted")
    after = served["after"]
    assert after.drafts and after.drafts > served["before"].drafts
    assert len(steps) == after.drafts
    assert sum(s["drafted"] for s in steps) == after.draft_tokens
    assert sum(s["accepted"] for s in steps) == after.accepted_tokens


def test_every_failing_probe_said_so_once_per_process(served):
    lines = served["lines"]
    missing = _by(lines, "missing-target")
    assert missing and all("target not found" in x["error"] for x in missing)
    raising = _by(lines, "raising-handler")
    assert len(raising) == 1 and "raises on every call" in raising[0]["error"]
    bad = _by(lines, "bad-expressions")
    assert bad and all("error" in v for v in bad[0].values())
    assert "missing-module" not in {ln.probe for ln in lines}
