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
                                      "bad-status", "planned-without-command", "module-elsewhere",
                                      "no-traits", "no-side", "unknown-side", "unknown-trait",
                                      "unknown-rival", "no-basis", "unknown-basis",
                                      "rule-without-text", "not-on-unknown-engine",
                                      "not-on-without-reason"])
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
    elif breakage == "no-traits":
        h.pop("traits")
    elif breakage == "no-side":
        h["traits"].pop("side")
    elif breakage == "unknown-side":
        h["traits"]["side"] = "elsewhere"
    elif breakage == "unknown-trait":
        h["traits"]["shiny"] = True
    elif breakage == "unknown-rival":
        h["traits"]["rivals"] = ["ghost"]
    elif breakage == "no-basis":
        data["experiments"]["logs-scan"].pop("confirms_by")
    elif breakage == "unknown-basis":
        data["experiments"]["logs-scan"]["confirms_by"] = "intuition"
    elif breakage == "rule-without-text":
        data["rules"] = [r for r in data["rules"] if r["id"] != "drafting-not-config"]
    elif breakage == "not-on-unknown-engine":
        data["experiments"]["replay"]["not_on"] = {"tgi": "its internals"}
    elif breakage == "not-on-without-reason":
        data["experiments"]["replay"]["not_on"] = {"llamacpp": " "}
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


def test_the_rules_groups_are_read_from_the_traits():
    g = C.groups()
    cat = C.load()
    for hid in g.engine_side:
        assert cat.hypotheses[hid].traits.oracle == "excludes"
    assert "compile-cache-pollution" in g.engine_side and "draft-parallel-config" in g.engine_side
    assert set(g.file_side) == {"draft-config-mismatch", "tokenizer-mismatch", "attention-mask"}
    assert set(g.oracle_shared) == set(g.file_side) | {"k-beyond-training"}
    assert g.replay_leads == ("rejection-sampler", "engine-drafting")
    assert g.contract_causes == ("draft-config-mismatch", "attention-mask")
    assert g.expected == ("sampling-confound",)
    assert set(g.elimination_rivals["draft-quality"]) == (
        set(g.engine_side) | set(g.oracle_shared) | {"metric-convention"})
    assert g.elimination_rivals["sampling-confound"] == g.replay_leads


def test_a_new_hypothesis_joins_its_groups_by_its_catalogue_entry_alone():
    data = copy.deepcopy(_data())
    data["hypotheses"].append({
        "id": "draft-kv-stale", "mechanism": "draft KV reused where it should be recomputed",
        "traits": {"side": "engine", "oracle": "excludes"}, "signatures": ["steep-decay"],
        "experiment": "replay", "seen": "a test"})
    data["experiments"]["replay"]["settles"].append("draft-kv-stale")
    cat = C.parse(data)
    assert "draft-kv-stale" in cat.where(oracle="excludes")
    assert "draft-kv-stale" in cat.rivals("draft-quality")
    assert "draft-kv-stale" not in cat.rivals("sampling-confound")


def test_a_confirmation_rests_on_its_experiments_basis_or_its_rules():
    cat = C.load()
    assert cat.confirms_by("compile-cache-ab") == "counterfactual"
    assert cat.confirms_by("replay") == "replay"
    assert cat.confirms_by("oracle-greedy") == "comparison"
    assert cat.confirms_by("rule:oracle-equal-low") == "elimination"
    assert cat.confirms_by("rule:root-cause") is None and cat.confirms_by("nope") is None


def test_experiments_that_read_vllms_internals_do_not_apply_to_llamacpp():
    cat = C.load()
    na = {e.id for e in cat.experiments.values() if e.not_applicable("llamacpp")}
    # what runs inside vLLM's Python process, or relaunches with vLLM's own flags or files
    assert {"replay", "verdict-patch", "probes", "taps", "astexec", "masks",
            "relaunch-counterfactual", "compile-cache-ab"} <= na
    # what reads the served weights, measures the server or relaunches it plainly applies
    assert not na & {"oracle-greedy", "oracle-sampled", "vocab-map-check", "spec-off-baseline",
                     "concurrency-ab", "repeat-ab", "trained-depth"}
    assert all(e.not_applicable("vllm") is None for e in cat.experiments.values())
