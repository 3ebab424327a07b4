"""The hypothesis catalogue: required ids, rules, refusal of inconsistent data, and the one
registry of experiments (every built one imports and is the experiment it says; every planned
one names a command that exists)."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest

from specdoctor.diagnose import catalogue as C

REQUIRED = ("compile-cache-pollution", "draft-parallel-config", "draft-attention-partial",
            "draft-config-mismatch", "rope-sync", "attention-mask", "kernel-numerics",
            "sampling-confound", "rejection-sampler", "target-hidden-noise", "draft-quality",
            "k-beyond-training", "draft-overhead", "cudagraph-capture-size",
            "tokenizer-mismatch", "uptime-drift", "load-dependent", "metric-convention")
RULES = ("oracle-equal-low", "oracle-gap-engine", "sampled-off-oracle",
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
                                      "not-settled", "settles-unknown", "duplicate",
                                      "bad-status", "planned-without-command", "module-elsewhere"])
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
    elif breakage == "bad-status":
        data["experiments"]["logs-scan"]["status"] = "soon"
    elif breakage == "planned-without-command":
        data["experiments"]["probes"]["status"] = "planned"
        data["experiments"]["probes"].pop("by_hand", None)
    elif breakage == "module-elsewhere":
        data["experiments"]["logs-scan"]["module"] = "specdoctor.diagnose.logs:LogsScan"
    else:
        data["hypotheses"].append(dict(h))
    with pytest.raises(C.CatalogueError):
        C.parse(data)


def test_every_built_experiment_is_the_one_its_entry_names():
    cat = C.load()
    built = [e for e in cat.experiments.values() if not e.planned]
    assert len(built) >= 13
    for spec in built:
        exp = C.experiment(spec)
        assert exp is not None and exp.id == spec.id, spec.module
        assert callable(exp.unavailable) and callable(exp.run)


def test_the_seeds_verdict_experiments_are_built():
    """The experiments of the two origin cases run in a diagnosis; the tokenizer check was
    deleted (vocab-map-check holds its tokenizer half; docs/diagnose.md says why)."""
    cat = C.load()
    for eid in ("probes", "kernel-equivalence", "astexec", "masks", "target-precision-ab"):
        assert not cat.experiments[eid].planned, eid
    assert "tokenizer-check" not in cat.experiments and "prompt-format" not in cat.hypotheses


def test_a_planned_experiment_has_no_module_yet_and_a_command_that_exists():
    """Planned means not built: once its module exists the entry must say built. Its command
    to run by hand is a real command of this CLI (no entry is planned today: the shipped ones
    are checked, and the mechanism on an entry made planned)."""
    from tests.cli.clitree import resolve

    planned = [e for e in C.load().experiments.values() if e.planned]
    data = _data()
    data["experiments"]["later"] = {**data["experiments"]["masks"], "status": "planned",
                                    "module": "specdoctor.experiments.later:Experiment",
                                    "by_hand": "specdoctor masks diff --window 64 --causal false"}
    made = C.parse(data).experiments["later"]
    for spec in [*planned, made]:
        module = spec.module.split(":")[0]
        parent = module.rsplit(".", 1)[0]
        exists = importlib.util.find_spec(parent) is not None and \
            importlib.util.find_spec(module) is not None
        assert not exists, f"{spec.id}: {module} exists; mark the entry built"
        assert C.experiment(spec) is None
        words = spec.by_hand.split()
        assert words[0] == "specdoctor", spec.by_hand
        cmd, err = resolve([w for w in words[1:] if not w.startswith(("-", "<", "'"))][:2])
        assert cmd is not None and cmd.path, f"{spec.id}: {spec.by_hand}: {err}"
        assert spec.planned_text().startswith(f"planned: {spec.does}; run by hand: specdoctor ")


def test_a_built_experiment_that_is_another_is_refused():
    spec = C.load().experiments["logs-scan"]
    wrong = C.ExperimentSpec(**{**spec.__dict__, "module": "specdoctor.experiments.depth:TrainedDepth"})
    with pytest.raises(C.CatalogueError, match="trained-depth"):
        C.experiment(wrong)
