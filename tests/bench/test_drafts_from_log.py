"""llama-server's drafts per request, joined from its own log lines, on a recorded session where
its responses cannot give them (tests/fixtures/llamacpp/lab-p-min-0.75/RECORDED.md)."""

import json
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench.measure import (
    MeasureParams, Measurement, RequestRecord, derive_drafts, drafts_from_log,
)

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp" / "lab-p-min-0.75"
K = 4


def _recorded() -> Measurement:
    d = json.loads((HERE / "measure.json").read_text())
    m = Measurement(url=d["url"], model=d["model"], params=MeasureParams(num_prompts=8),
                    engine="llamacpp")
    m.requests = [RequestRecord(r["index"], "", r["completion_tokens"], r["latency_s"],
                                AcceptanceProfile(drafts=None, draft_tokens=r["draft_tokens"],
                                                  accepted_tokens=r["accepted_tokens"]))
                  for r in d["per_request"]]
    t = d["total"]
    m.total = AcceptanceProfile(drafts=t["drafts"], draft_tokens=t["draft_tokens"],
                                accepted_tokens=t["accepted_tokens"], k=K)
    return m


def test_the_responses_alone_leave_the_drafts_unknown():
    m = _recorded()
    derive_drafts(m)
    assert all(r.profile.drafts is None for r in m.requests)


def test_the_log_lines_give_each_request_its_drafts_adding_up_to_the_counter():
    m = _recorded()
    assert drafts_from_log(m, (HERE / "server.log").read_text())
    drafts = [r.profile.drafts for r in m.requests]
    assert sum(drafts) == m.total.drafts == 38
    for r in m.requests:   # each within what its draft tokens allow: 1..k tokens a draft
        assert -(-r.profile.draft_tokens // K) <= r.profile.drafts <= r.profile.draft_tokens
    from specdoctor.experiments.common import units

    u = units(m)   # the oracle's paired comparison has its units again
    assert u is not None and u.shape == (8, 2) and u[:, 1].sum() == m.total.accepted_tokens
    assert any("from the server's log lines" in n for n in m.notes)


def test_lines_that_are_not_these_requests_are_not_joined():
    log = (HERE / "server.log").read_text().splitlines()
    lines = [x for x in log if "draft acceptance" in x]
    # the last request's line lost (not written yet): no run of lines matches all eight
    assert not drafts_from_log(_recorded(), "\n".join(x for x in log if x != lines[-1]))
    # another server's log: no line has these counts
    other = "\n".join(x.replace("accepted /", "accepted / 1") for x in log)
    assert not drafts_from_log(_recorded(), other)
    # lines whose drafts do not add up to the server's own counter are not trusted
    off = _recorded()
    off.total = AcceptanceProfile(drafts=37, draft_tokens=off.total.draft_tokens,
                                  accepted_tokens=off.total.accepted_tokens, k=K)
    assert not drafts_from_log(off, "\n".join(log))
    assert all(r.profile.drafts is None for r in off.requests)
