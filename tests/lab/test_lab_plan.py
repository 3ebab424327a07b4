"""``lab.plan``: what ``lab up`` starts, resolved by the library (no server)."""

from __future__ import annotations

import json

import pytest

from specdoctor.errors import LabError
from specdoctor.lab import lab as labmod


def spec_config(plan: labmod.LabPlan) -> dict:
    argv = list(plan.spec.argv)
    return json.loads(argv[argv.index("--speculative-config") + 1])


def test_default_request_is_the_random_target_drafting_for_itself():
    pytest.importorskip("transformers")
    plan = labmod.plan(labmod.LabRequest(port=18766))
    argv = list(plan.spec.argv)
    assert plan.k == labmod.DEFAULT_K and plan.draft is None
    assert argv[argv.index("--model") + 1] == str(plan.target)
    assert spec_config(plan) == {"method": "draft_model", "model": str(plan.target),
                                 "num_speculative_tokens": labmod.DEFAULT_K}
    assert plan.spec.port == 18766 and plan.spec.label == "lab:draft_model:k=4"


def test_drafter_methods_take_their_trained_k_and_a_fault_its_own():
    pytest.importorskip("torch")
    healthy = labmod.plan(labmod.LabRequest(method="mtp", control="pos0"))
    sick = labmod.plan(labmod.LabRequest(method="mtp", control="pos0",
                                         fault="mtp-k-beyond-training"))
    assert (healthy.k, sick.k) == (2, 6)
    assert spec_config(sick)["num_speculative_tokens"] == 6
    assert labmod.plan(labmod.LabRequest(method="mtp", control="pos0", k=3)).k == 3


def test_bad_requests_name_the_fix():
    with pytest.raises(LabError, match="faults of ngram: none"):
        labmod.plan(labmod.LabRequest(method="ngram", fault="dflash-causal"))
    with pytest.raises(LabError, match="faults of draft_model: draft-heads-lost"):
        labmod.plan(labmod.LabRequest(method="draft_model", fault="dflash-causal"))
    with pytest.raises(LabError, match="no controls"):
        labmod.plan(labmod.LabRequest(method="ngram", control="pos0"))
    with pytest.raises(LabError, match="target: random, trained"):
        labmod.plan(labmod.LabRequest(target="huge"))
    with pytest.raises(LabError, match="at least 1"):
        labmod.plan(labmod.LabRequest(k=0))


def test_an_unknown_llamacpp_fault_is_bad_input_naming_the_llamacpp_faults():
    from specdoctor.lab.llamacpp import FAULTS
    from tests.conftest import run_cli

    r = run_cli("lab", "up", "--engine", "llamacpp", "--fault", "dflash-window")
    assert r.returncode == 2, r.stderr
    assert "no fault 'dflash-window'" in r.stderr and all(f in r.stderr for f in FAULTS)
