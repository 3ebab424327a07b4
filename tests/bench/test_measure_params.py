"""The protocol's settings object refuses what it cannot run, and a measurement becomes one
store run as the CLI records it (no server: a measurement built by hand)."""

from __future__ import annotations

import dataclasses

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench import measure as proto
from specdoctor.errors import InputError
from specdoctor.store.db import Store


@pytest.mark.parametrize(("change", "needle"), [
    ({"concurrency": 0}, "from 1 to 1024"), ({"num_prompts": 0}, "from 1 to 100,000"),
    ({"num_prompts": 10 ** 30}, "from 1 to 100,000"),
    ({"temperature": -1.0}, "out of range"), ({"top_p": 0.0}, "out of range"),
    ({"per_request": "scrape", "concurrency": 2}, "needs --concurrency 1"),
    ({"per_request": "maybe"}, "per-request source"), ({"suite": "poems"}, "prompt suite"),
])
def test_check_names_the_problem(change, needle):
    with pytest.raises(InputError, match=needle):
        dataclasses.replace(proto.MeasureParams(), **change).check()


def test_defaults_pass():
    proto.MeasureParams().check()


def test_a_failed_measurement_is_stored_whole(tmp_path):
    p = AcceptanceProfile(drafts=3, draft_tokens=12, accepted_tokens=5,
                          accepted_per_position=(3, 1, 1, 0))
    m = proto.Measurement(url="http://x", model="lab", params=proto.MeasureParams())
    m.requests.append(proto.RequestRecord(0, "def f():", 40, 0.5, p, ([1, 2], [4, 4])))
    m.total, m.error = p, "server died"
    store = Store(tmp_path / "s.db")
    run_id = store.add_run(**m.store_run({"argv": ["vllm"]}))
    row = store.run(run_id)
    assert (row.kind, row.status, row.error, row.target) == ("measure", "failed", "server died",
                                                             "http://x")
    assert row.launch_spec == {"argv": ["vllm"]}
    (req,) = store.requests(run_id)
    assert (req.prompt, req.completion_tokens, req.per_step) == ("def f():", 40, [[1, 2], [4, 4]])
    assert req.profile["accepted_per_position"] == [3, 1, 1, 0]
