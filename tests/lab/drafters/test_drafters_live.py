"""Known answers from real vLLM: one server per drafter method, each serving a hand-wired
control whose profile is designed exactly (see ``lab.drafters``). If the measured profile is
anything else, specdoctor's measurement path (or the lab's understanding of the method) is
wrong — this is the proof the trained drafters' and the faults' figures rest on.

Three servers in all (~45 s each on 2 cores), booted together (~100 s for the three), two of
them for this module: the DFlash control is the session's shared server
(``dflash_pos0_with_packs`` in tests/conftest.py), served with two observing probe packs that
tests/packs/test_packs_lab.py reads; no training: the controls are hand-wired. Each server is
measured once; both tests read that measurement (a greedy measurement of a control is the
same count for count every time: the profile test's own per-request checks say so).
"""

from __future__ import annotations

import json

import pytest

from specdoctor.bench.prompts import take
from specdoctor.lab import drafters
from specdoctor.lab.drafters import offline
from tests.conftest import DFLASH_POS0_WITH_PACKS, run_cli, start_mtp_trained_ci, will_run

pytestmark = pytest.mark.lab

# method → (control, k): each control at a k past its designed run, so the cliff shows
CASES = {"eagle3": ("pos0", 3), "dflash": ("pos0", 4), "mtp": ("pos0", 3)}
N, MAX_TOKENS = 6, 40


@pytest.fixture(scope="module")
def servers(request, lab_pool):
    """All three controls, booted together: this module's two and the session's DFlash one
    (and test_trained_live.py's server, where the session runs it)."""
    for method, (control, k) in CASES.items():
        if method == "dflash":
            # the same launch with two observing packs on, shared with the packs' lab test
            lab_pool.start("dflash-pos0-packs", *DFLASH_POS0_WITH_PACKS)
        else:
            lab_pool.start(f"{method}-{control}-{k}", "--method", method, "--control", control,
                           "--k", str(k))
    if will_run(request, "tests/lab/drafters/test_trained_live.py"):
        start_mtp_trained_ci(lab_pool)   # the next module's: it boots beside these
    yield
    for method, (control, k) in CASES.items():
        if method != "dflash":
            lab_pool.stop(f"{method}-{control}-{k}")


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def server(request, servers, lab_pool):
    method = request.param
    control, k = CASES[method]
    if method == "dflash":
        info = request.getfixturevalue("dflash_pos0_with_packs")
    else:
        info = lab_pool.get(f"{method}-{control}-{k}")
    assert (info["method"], info["control"], info["k"]) == (method, control, k)
    # one measurement of this server, read by both tests
    return {**info, "measured": measure(info["url"])}


def measure(url: str) -> dict:
    proc = run_cli("measure", "--url", url, "-n", str(N), "--max-tokens", str(MAX_TOKENS),
                   "--json", "--no-store")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_control_profile_is_exactly_as_designed(server):
    method, control, k = server["method"], server["control"], server["k"]
    designed = drafters.control(method, control).designed(k)
    out = server["measured"]
    total = out["total"]
    assert total["per_position"] == designed
    # every request walks the same steps: a run of `run` right drafts, then the bonus token
    run = designed.count(1.0)
    steps = len(offline.walk([run] * (MAX_TOKENS + 8), 0, k, MAX_TOKENS))
    assert total["drafts"] == N * steps
    assert total["accepted_per_position"] == [N * steps if d else 0 for d in designed]
    assert total["mean_acceptance_length"] == 1 + run
    for r in out["per_request"]:  # and each response's own counters say the same
        assert (r["drafts"], r["accepted_per_position"]) == (
            steps, [steps if d else 0 for d in designed])


def test_offline_prediction_matches_the_server_count_for_count(server):
    method, control, k = server["method"], server["control"], server["k"]
    target, draft = drafters.module(method).control(control)
    predicted = offline.predict(method, target, draft, take("code", N), k, MAX_TOKENS)
    total = server["measured"]["total"]
    assert (predicted.drafts, list(predicted.accepted_per_position)) == (
        total["drafts"], total["accepted_per_position"])
