"""The hypothesis catalogue: required ids, rules, and refusal of inconsistent data."""

from __future__ import annotations

import copy
import json

import pytest

from specdoctor.diagnose import catalogue as C

REQUIRED = ("compile-cache-pollution", "draft-parallel-config", "draft-attention-partial",
            "draft-config-mismatch", "rope-sync", "attention-mask", "kernel-numerics",
            "sampling-confound", "rejection-sampler", "target-hidden-noise", "draft-quality",
            "k-beyond-training", "draft-overhead", "cudagraph-capture-size",
            "tokenizer-mismatch", "uptime-drift", "load-dependent", "metric-convention")
RULES = ("oracle-equal-low", "oracle-gap-engine", "sampled-below-oracle",
         "sampled-equal-oracle", "counterfactual-only", "difference-not-verdict")


def test_required_hypotheses_and_rules_are_there():
    cat = C.load()
    assert set(REQUIRED) <= set(cat.hypotheses)
    assert set(RULES) <= set(cat.rules)
    # the same experiment settles both sampling hypotheses
    assert cat.settled_with("rejection-sampler") == ["sampling-confound"]
    assert "draft-config-mismatch" in [h.id for h in cat.explaining(("cliff",))]
    assert "oracle-counterfactual" in cat.deciders("draft-config-mismatch")


def test_costs_order_static_before_restarts():
    cat = C.load()
    assert (cat.experiments["logs-scan"].cost.minutes()
            < cat.experiments["oracle-greedy"].cost.minutes()
            < cat.experiments["compile-cache-ab"].cost.minutes())


def _data():
    return json.loads(C.CATALOGUE_FILE.read_text())


@pytest.mark.parametrize("breakage", ["unknown-experiment", "unknown-signature",
                                      "not-settled", "settles-unknown", "duplicate"])
def test_inconsistent_catalogues_are_refused(breakage):
    data = copy.deepcopy(_data())
    h = data["hypotheses"][0]
    if breakage == "unknown-experiment":
        h["experiment"] = "nope"
    elif breakage == "unknown-signature":
        h["signatures"] = ["wobbly"]
    elif breakage == "not-settled":
        data["experiments"][h["experiment"]]["settles"].remove(h["id"])
    elif breakage == "settles-unknown":
        data["experiments"]["logs-scan"]["settles"].append("ghost")
    else:
        data["hypotheses"].append(dict(h))
    with pytest.raises(C.CatalogueError):
        C.parse(data)
