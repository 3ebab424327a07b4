"""A trained drafter on real vLLM: the MTP layer (trained for one step, served at k = 2, as
Case B deployed MTP2) on the ``ci`` training budget, one boot.

The served profile must decay with position, as real drafters' do, and equal, count for count,
what the drafter's reference forward predicts offline (greedy, fp32): the trained path (weights,
config, recursion) is then what the lab says it is. The full-budget figures of every method
are the fault clinic's (benchmarks/drafters_faults.py, docs/lab.md).

Cost: training on the ci budget (~1 minute with a cold cache, shared with the oracle's lab test)
and one boot (~45 s on 2 cores), started with the drafter controls' (tests/conftest.py
``start_mtp_trained_ci``) where the session runs test_drafters_live.py too.
"""

from __future__ import annotations

import json

import pytest

from specdoctor.bench.prompts import take
from specdoctor.lab import drafters
from specdoctor.lab.drafters import cache, offline
from tests.conftest import MTP_TRAINED_CI, run_cli, start_mtp_trained_ci

pytestmark = pytest.mark.lab
METHOD, BUDGET, N, MAX_TOKENS = "mtp", "ci", 6, 40


@pytest.fixture(scope="module")
def server(lab_pool):
    start_mtp_trained_ci(lab_pool)   # trains first, outside the CLI call's time limit
    info = lab_pool.get("mtp-trained-ci")
    assert MTP_TRAINED_CI == ("--method", METHOD, "--train-budget", BUDGET)
    yield info
    lab_pool.stop("mtp-trained-ci")


def test_served_at_the_k_it_was_deployed_with(server):
    assert server["k"] == drafters.TRAINED_K[METHOD] == 2
    assert server["draft"] is None  # the MTP layer lives in the target's checkpoint
    # what vLLM reads is the published copy of the trained MiMo (named by content)
    assert server["target"] == str(cache.published(drafters.module(METHOD).trained_pair(BUDGET)[0]))


def test_trained_profile_decays_and_equals_the_offline_prediction(server):
    proc = run_cli("measure", "--url", server["url"], "-n", str(N), "--max-tokens",
                   str(MAX_TOKENS), "--json", "--no-store")
    assert proc.returncode == 0, proc.stderr[-2000:]
    total = json.loads(proc.stdout)["total"]
    pp = total["per_position"]
    assert len(pp) == 2
    assert 0.3 < pp[0] < 1.0  # trained: well above a random head's ~0
    assert 0.0 < pp[1] < pp[0]  # the recursive step, past its training, accepts less
    target, draft = drafters.module(METHOD).trained_pair(BUDGET)
    pred = offline.predict(METHOD, target, draft, take("code", N), server["k"], MAX_TOKENS)
    assert (total["drafts"], total["accepted_per_position"]) == (
        pred.drafts, list(pred.accepted_per_position))
