"""Counterfactual leads and their search, on the configs of real drafters (the lab's trained
target, its independent 1-layer drafter, and the faulted copies of the clinic).

A lead is a change that could recover acceptance; the search tries several of one hypothesis
together first, then alone. The trial function here stands in for a run: it returns accepted
draft tokens per step as the greedy oracle gave them for the trained target drafting with a
copy of itself whose rms_norm_eps is 1.0 (0.36) and with that field restored (4.00), so the
verdicts come from ``rules.decide_counterfactual`` on those figures.
"""

from __future__ import annotations

import json

import pytest

from specdoctor.verdict import rules
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.counterfactual import (
    _ABSENT,
    Lead,
    joint,
    leads,
    patched_copy,
    search,
)
from specdoctor.served_files import rope_view

# The lab target's config.json (transformers 5 spelling), as trained for the ci budget.
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 32, "intermediate_size": 384, "hidden_act": "silu",
          "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "vocab_size": 1024,
          "max_position_embeddings": 2048,
          "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}}


def _draft(**changes) -> dict:
    d = json.loads(json.dumps(TARGET))
    d.update(changes)
    return d


def test_a_far_off_norm_epsilon_is_a_lead_and_the_independent_drafters_sizes_are_not():
    (lead,) = leads(_draft(rms_norm_eps=1.0), TARGET, "draft_model")
    assert (lead.field, lead.draft_value, lead.value) == ("rms_norm_eps", 1.0, 1e-06)
    small = _draft(hidden_size=64, intermediate_size=192, num_hidden_layers=1,
                   num_attention_heads=2, num_key_value_heads=1)
    assert leads(small, TARGET, "draft_model") == []


def test_the_rope_is_compared_as_a_whole_whatever_its_spelling():
    linear = _draft(rope_parameters={"rope_theta": 10000.0, "rope_type": "linear",
                                     "factor": 2.0})
    (lead,) = leads(linear, TARGET, "draft_model")
    assert lead.field == "rope_parameters"
    assert lead.draft_value == {"factor": 2.0, "rope_type": "linear"}
    assert lead.value == {"factor": _ABSENT, "rope_type": _ABSENT}
    assert "factor 2.0" not in lead.change() and "(absent)" in lead.change()
    # an older spelling with the same meaning is no lead; with another theta it is one field
    old = {k: v for k, v in TARGET.items() if k != "rope_parameters"}
    assert leads({**old, "rope_theta": 10000.0}, TARGET, "draft_model") == []
    assert leads({**old, "rope_theta": 10000.0, "rope_scaling": None}, TARGET, "x") == []
    (theta,) = leads({**old, "rope_theta": 1000.0}, TARGET, "draft_model")
    assert (theta.field, theta.draft_value, theta.value) == ("rope_theta", 1000.0, 10000.0)
    # a linear factor only the drafter has, in the older spelling, is a lead too
    (scaled,) = leads({**old, "rope_theta": 10000.0,
                       "rope_scaling": {"type": "linear", "factor": 2.0}}, TARGET, "x")
    assert scaled.field == "rope_scaling" and scaled.draft_value["rope_type"] == "linear"
    assert rope_view({"partial_rotary_factor": 1.0, "rope_theta": 5.0}) == {"rope_theta": 5.0}
    # a drafter config that leaves theta to its architecture's default (EAGLE3 heads do)
    assert [x for x in leads(old, TARGET, "eagle3") if x.field.startswith("rope")] == []


def test_a_top_level_partial_rotary_factor_is_read_as_part_of_the_rope(tmp_path):
    # the older spelling: partial_rotary_factor beside the config's other top-level keys
    old = {k: v for k, v in TARGET.items() if k != "rope_parameters"}
    half = {**old, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    (lead,) = leads(half, TARGET, "draft_model")
    assert (lead.field, lead.draft_value, lead.value) == ("partial_rotary_factor", 0.5, _ABSENT)
    # the same factor in the other spelling, or the neutral 1.0 spelled out, is no lead
    nested = _draft(rope_parameters={"rope_theta": 10000.0, "rope_type": "default",
                                     "partial_rotary_factor": 0.5})
    assert leads(half, nested, "draft_model") == []
    assert leads({**old, "rope_theta": 10000.0, "partial_rotary_factor": 1.0}, TARGET, "x") == []
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(half))
    new = json.loads((patched_copy(src, lead, tmp_path / "w", 0) / "config.json").read_text())
    assert "partial_rotary_factor" not in new and rope_view(new) == rope_view(TARGET)


def test_the_rope_counterfactual_gives_the_drafter_the_targets_rope_keys(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    old = {k: v for k, v in TARGET.items() if k != "rope_parameters"}
    cfg = {**old, "rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 2.0}}
    (src / "config.json").write_text(json.dumps(cfg))
    (lead,) = leads(cfg, TARGET, "draft_model")
    new = json.loads((patched_copy(src, lead, tmp_path / "w", 0) / "config.json").read_text())
    assert "rope_scaling" not in new and "rope_theta" not in new
    assert new["rope_parameters"] == TARGET["rope_parameters"]
    assert rope_view(new) == rope_view(TARGET)


def test_a_field_only_one_side_sets_is_compared_with_vllms_default_for_it():
    # vLLM 0.32's LlamaForCausalLM reads getattr(config, "logit_scale", 1.0)
    (lead,) = leads(_draft(logit_scale=0.25), TARGET, "draft_model")
    assert lead.value is _ABSENT and "only the drafter sets logit_scale" in lead.why
    assert lead.strength == "differs" and "vLLM's default 1.0" in lead.why
    # across architectures the target says nothing: vLLM's default alone, a weaker lead
    (other,) = leads(_draft(logit_scale=0.25, model_type="gemma"), TARGET, "draft_model")
    assert other.strength == "default" and other.value is _ABSENT
    assert leads(_draft(logit_scale=1.0, model_type="gemma"), TARGET, "draft_model") == []


def _trials(table: dict[str, float], before: float, k: int = 4):
    """A trial that 'measures' the figure in ``table`` for each change (by field name)."""
    calls: list[str] = []

    def trial(lead: Lead, n: int):
        calls.append(lead.field)
        after = table[lead.field]
        f = rules.decide_counterfactual(lead.hypothesis, lead.change(), before, after, float(k),
                                        significant=after - before > 0.05 * before)
        return f, None, {"before": before, "after": after}
    return trial, calls


EPS = Lead("rms_norm_eps", 1.0, 1e-06, "draft-config-mismatch", "differs")
ROPE = Lead("rope_parameters.rope_theta", 1000.0, 10000.0, "draft-config-mismatch", "differs")


def test_one_joint_run_excludes_several_leads_that_do_not_recover():
    trial, calls = _trials({"rms_norm_eps + rope_parameters.rope_theta": 1.33}, before=1.32)
    found, _, _ = search([EPS, ROPE], ("draft-config-mismatch",), trial)
    assert calls == ["rms_norm_eps + rope_parameters.rope_theta"]
    assert [f.verdict for f in found] == [Verdict.EXCLUDED]


def test_a_joint_recovery_is_narrowed_to_the_field_that_recovers_alone():
    # 0.36: the drafter with rms_norm_eps 1.0 (oracle); 4.0 once it is 1e-6
    trial, calls = _trials({"rms_norm_eps + rope_parameters.rope_theta": 4.0,
                            "rms_norm_eps": 4.0, "rope_parameters.rope_theta": 0.36},
                           before=0.36)
    found, _, _ = search([EPS, ROPE], ("draft-config-mismatch",), trial)
    assert calls == ["rms_norm_eps + rope_parameters.rope_theta", "rms_norm_eps",
                     "rope_parameters.rope_theta"]
    (f,) = found
    assert f.verdict is Verdict.CONFIRMED and f.evidence.startswith("rms_norm_eps 1.0")


def test_fields_that_only_recover_together_are_confirmed_together_and_time_is_respected():
    trial, _ = _trials({"rms_norm_eps + rope_parameters.rope_theta": 4.0,
                        "rms_norm_eps": 0.4, "rope_parameters.rope_theta": 0.4}, before=0.36)
    (f,) = search([EPS, ROPE], ("draft-config-mismatch",), trial)[0]
    assert f.verdict is Verdict.CONFIRMED and "act together" in f.evidence
    trial, calls = _trials({"rms_norm_eps + rope_parameters.rope_theta": 4.0}, before=0.36)
    (f,) = search([EPS, ROPE], ("draft-config-mismatch",), trial, more=lambda: False)[0]
    assert calls == ["rms_norm_eps + rope_parameters.rope_theta"]
    assert f.verdict is Verdict.CONFIRMED and "2 not run (time)" in f.evidence


def test_joint_applies_every_edit():
    j = joint([EPS, ROPE])
    assert dict(j.config_edits()) == {"rms_norm_eps": 1e-06, "rope_parameters.rope_theta": 10000.0}
    assert joint([EPS]) is EPS


def test_fields_that_each_recover_alone_are_all_named_with_what_they_recover_together():
    trial, calls = _trials({"rms_norm_eps + rope_parameters.rope_theta": 3.0,
                            "rms_norm_eps": 1.5, "rope_parameters.rope_theta": 1.2}, before=0.36)
    (f,) = search([EPS, ROPE], ("draft-config-mismatch",), trial)[0]
    assert f.verdict is Verdict.CONFIRMED
    assert f.evidence.startswith("together: rms_norm_eps + rope_parameters.rope_theta")
    assert "each alone: rms_norm_eps 1.0 → 1e-06" in f.evidence
    assert "rope_parameters.rope_theta 1000.0 → 10000.0" in f.evidence
    assert f.recovered == pytest.approx((3.0 - 0.36) / (4 - 0.36))


def test_what_no_reference_could_check_stays_open_and_is_listed_in_the_finding():
    from specdoctor.experiments.contract import compare as cmp
    from specdoctor.experiments.counterfactual import Review, _verdicts

    review = cmp.Review(unchecked=[("draft-config-mismatch", "foo_scale = 3: no reference")])
    tried = [rules.decide_counterfactual("draft-config-mismatch", "rms_norm_eps 1.0 → 1e-06",
                                         0.36, 0.37, 4.0, significant=False)]
    merged = rules.one_per_hypothesis(
        _verdicts(("draft-config-mismatch", "attention-mask"), tried, Review([], review)),
        evidence="decisive")
    f, mask = merged
    assert f.verdict is Verdict.INCONCLUSIVE and "foo_scale = 3" in f.evidence
    assert f.unchecked == ("foo_scale = 3: no reference",)
    assert f.to_json()["unchecked"] == ["foo_scale = 3: no reference"]
    assert mask.verdict is Verdict.EXCLUDED and mask.unchecked == ()


def test_leads_left_in_the_context_become_counterfactual_leads_once():
    """A rope theta the probes or the engine's own functions saw defaulted (a field the
    drafter's file does not hold) is tried; a field the counterfactual already found is not
    tried twice; a lead that removes a field removes it."""
    from specdoctor.experiments import counterfactual as cf
    from specdoctor.verdict.findings import Lead

    draft = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
             "dflash_config": {"use_swa": True}, "layer_types": ["sliding_attention"]}
    target = {"model_type": "qwen3", "rope_theta": 10000.0}
    own = cf.leads(draft, target, "dflash")
    assert {"dflash_config.use_swa", "layer_types"} <= {x.field for x in own}
    ctx_leads = [Lead("draft-config-mismatch", "rope_theta", 10000.0, "defaulted", "probes"),
                 Lead("attention-mask", "dflash_config.use_swa", False, "window", "masks"),
                 Lead("attention-mask", "layer_types", None, "sliding", "masks", remove=True)]
    got = cf.from_context(ctx_leads, draft, {x.field for x in own})
    by = {x.field: x for x in got}
    assert "dflash_config.use_swa" not in by and "layer_types" not in by   # found already
    assert by["rope_theta"].value == 10000.0 and by["rope_theta"].draft_value is cf._ABSENT
    assert by["rope_theta"].hypothesis == "draft-config-mismatch"
    assert "(probes)" in by["rope_theta"].why
    patched = cf.put(draft, "rope_theta", by["rope_theta"].value)
    assert patched["rope_theta"] == 10000.0
    got = cf.from_context(ctx_leads, draft, set())
    (gone,) = [x for x in got if x.field == "layer_types"]
    assert gone.value is cf._ABSENT
    assert "layer_types" not in cf.put(draft, "layer_types", gone.value)


def test_candidate_values_left_untried_keep_the_lead_open_and_are_named():
    from specdoctor.experiments.contract.compare import Candidate

    mask = Lead("dflash_config.mask_token_id", 500, 2, "draft-config-mismatch", "ordinary",
                alternatives=tuple(Candidate(v, "special") for v in (3, 4, 5, 6)))
    trial, calls = _trials({"dflash_config.mask_token_id": 0.36}, before=0.36)
    (f,) = search([mask], ("draft-config-mismatch",), trial)[0]
    assert len(calls) == 4                        # the first value and three more
    assert f.verdict is Verdict.INCONCLUSIVE and f.unchecked == ("dflash_config.mask_token_id = 6",)
    (f,) = search([mask], ("draft-config-mismatch",), trial, more=lambda: False)[0]
    assert f.unchecked == ("dflash_config.mask_token_id = 3, 4, 5, 6",)
    assert "not tried: dflash_config.mask_token_id = 3, 4, 5, 6" in f.evidence
