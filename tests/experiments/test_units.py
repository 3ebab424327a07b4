"""Pure parts of the experiments: counterfactual leads, trained depth, launch editing."""

from __future__ import annotations

import json
import sys

import pytest

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.counterfactual import leads, patched_copy, review_for
from specdoctor.experiments.depth import decide, trained_depth
from tests.diagnose.recorded import profile

LLAMA = {"hidden_size": 128, "num_hidden_layers": 2, "head_dim": 32, "rms_norm_eps": 1e-6,
         "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "vocab_size": 1024}


def test_a_rope_difference_is_a_lead_and_sizes_are_not():
    draft = json.loads(json.dumps(LLAMA))
    draft["rope_parameters"]["rope_theta"] = 1000.0
    draft["hidden_size"], draft["num_hidden_layers"] = 64, 1
    found = leads(draft, LLAMA, "draft_model")
    assert [(x.field, x.value, x.hypothesis) for x in found] == [
        ("rope_parameters.rope_theta", 10000.0, "draft-config-mismatch")]
    assert leads(dict(LLAMA), LLAMA, "draft_model") == []


def test_the_review_says_the_sizes_are_the_checkpoints_to_pin(tmp_path):
    from specdoctor.experiments.base import Context

    d, t = tmp_path / "d", tmp_path / "t"
    for p, cfg in ((d, {**LLAMA, "hidden_size": 64, "num_hidden_layers": 1}), (t, LLAMA)):
        p.mkdir()
        (p / "config.json").write_text(json.dumps({**cfg, "architectures": ["LlamaForCausalLM"],
                                                   "model_type": "llama"}))
    r = review_for(Context(workdir=tmp_path, method="draft_model", target_dir=t, draft_dir=d))
    assert r.leads == [] and r.review is not None
    sizes = [c for c in r.review.checked if "a size" in c]
    assert any(c.startswith("hidden_size 64") for c in sizes)
    assert any(c.startswith("num_hidden_layers 1") for c in sizes)


def test_dflash_mask_fields_and_layer_ids():
    # shapes of the recorded DFlash drafters' configs (a window, layer ids one too low)
    qwen3 = {**LLAMA, "use_sliding_window": False, "num_hidden_layers": 2,
             "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
    head = {**qwen3, "architectures": ["DFlashDraftModel"]}

    def fixed(cfg: dict) -> list:   # the leads a value in some file contradicts
        return [x for x in leads(cfg, qwen3, "dflash") if not x.search]

    window = {**head, "dflash_config": {"use_swa": True, "swa_window_size": 4,
                                        "target_layer_ids": [0, 1]}}
    (lead,) = fixed(window)
    assert (lead.field, lead.value, lead.hypothesis) == ("dflash_config.use_swa", False,
                                                         "attention-mask")
    shifted = {**head, "dflash_config": {"target_layer_ids": [-1, 0]}}
    (lead,) = leads(shifted, qwen3, "dflash")
    assert lead.value == [0, 1] and lead.hypothesis == "draft-config-mismatch"
    assert lead.strength == "problem" and "[-1] outside 0..1" in lead.why
    healthy = {**head, "dflash_config": {"target_layer_ids": [0, 1]}}
    assert fixed(healthy) == []
    # in range and as many as fc reads: only a search can tell, over the other sets
    (search,) = leads(healthy, qwen3, "dflash")
    assert search.search and search.strength == "search"
    causal = {**head, "dflash_config": {"causal": True, "target_layer_ids": [0, 1]}}
    assert [x.field for x in fixed(causal)] == ["dflash_config.causal"]


def test_patched_copy_has_a_neutral_name_and_one_change(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    cfg = {**LLAMA, "rope_parameters": {"rope_theta": 1000.0}}
    (src / "config.json").write_text(json.dumps(cfg))
    (src / "model.safetensors").write_bytes(b"w")
    (lead,) = leads(cfg, LLAMA, "draft_model")
    out = patched_copy(src, lead, tmp_path / "work", 0)
    assert out.name == "draft" and "rope" not in str(out)
    new = json.loads((out / "config.json").read_text())
    assert new["rope_parameters"]["rope_theta"] == 10000.0
    assert json.loads((src / "config.json").read_text()) == cfg
    assert (out / "model.safetensors").read_bytes() == b"w"


def _unconditional(conditional: list[float]) -> list[float]:
    out, p = [], 1.0
    for c in conditional:
        p *= c
        out.append(p)
    return out


def test_trained_depth_decides_at_nine_tenths_of_the_trained_rate():
    # conditional 0.8 at the trained position; past it 85% of that decays, 95% holds up
    decays = decide(4, 1, 2, _unconditional([0.8, 0.8, 0.8 * 0.85, 0.8 * 0.85]))
    holds = decide(4, 1, 2, _unconditional([0.8, 0.8, 0.8 * 0.95, 0.8 * 0.95]))
    assert decays.verdict is Verdict.CONFIRMED and "decay" in decays.evidence
    # sized: positions 2 and 3 (0-based) held at 0.8 from position 1's 0.64 would accept
    # 0.512 + 0.4096; they accept 0.64*0.68 and that times 0.68
    lost = (0.512 + 0.4096) - (0.64 * 0.68 + 0.64 * 0.68 ** 2)
    assert decays.size is not None and decays.size.loss == pytest.approx(lost)
    assert holds.size is None
    assert holds.verdict is Verdict.EXCLUDED and "hold up" in holds.evidence


def test_trained_depth_on_the_recorded_mtp_profiles():
    assert trained_depth("mtp", None, {"num_nextn_predict_layers": 1}) == (1, 2)
    assert trained_depth("dflash", {"block_size": 4}, None) == (3, 3)
    assert trained_depth("draft_model", {}, {}) is None
    far = decide(6, 1, 2, profile("mtp-k-beyond-training").per_position)
    assert far.verdict is Verdict.CONFIRMED and "0.72" in far.evidence
    assert decide(2, 1, 2, profile("healthy:mtp").per_position).verdict is Verdict.EXCLUDED
    # a drafter trained for the depth holds its conditional rates (recorded offline reference)
    held = [0.662, 0.472, 0.353, 0.297, 0.247, 0.222]
    assert decide(6, 1, 2, held).verdict is Verdict.EXCLUDED


def test_the_oracle_runs_for_every_method_it_covers_and_mtp_needs_no_drafter_dir(tmp_path):
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.oracle_gap import oracle_unavailable

    def why(method, draft, k=4):
        return oracle_unavailable(Context(workdir=tmp_path, method=method, target_dir=tmp_path,
                                          draft_dir=draft, prompts=["def f():"], k=k))

    assert why("mtp", None) is None  # its layers are in the target's checkpoint
    assert why("ngram", None) is None
    assert why("eagle3", tmp_path) is None and why("dflash", tmp_path) is None
    assert "drafter's directory" in why("eagle3", None)
    assert "no oracle for method 'suffix'" in why("suffix", None)
    # what stays unknown is named with the flag that gives it; k is never assumed
    assert "--k" in why("ngram", None, k=None) and "--method" in why(None, None)


def test_the_review_also_carries_the_leads_other_experiments_left(tmp_path):
    from specdoctor.experiments.base import Context
    from specdoctor.verdict.findings import Lead

    d, t = tmp_path / "d", tmp_path / "t"
    for p, cfg in ((d, {**LLAMA, "hidden_size": 64, "num_hidden_layers": 1}), (t, LLAMA)):
        p.mkdir()
        (p / "config.json").write_text(json.dumps({**cfg, "architectures": ["LlamaForCausalLM"],
                                                   "model_type": "llama"}))
    seen = Lead("draft-config-mismatch", "rope_theta", 500000.0, "the live engine's", "probes")
    ctx = Context(workdir=tmp_path, method="draft_model", target_dir=t, draft_dir=d,
                  leads=[seen])
    (lead,) = review_for(ctx).leads
    assert (lead.field, lead.value, lead.hypothesis) == ("rope_theta", 500000.0,
                                                         "draft-config-mismatch")
    assert "(probes)" in lead.why


def test_a_relaunching_experiment_says_what_it_lacks(tmp_path):
    from specdoctor.experiments import common
    from specdoctor.experiments.base import Context
    from specdoctor.launch import LaunchSpec

    bare = Context(workdir=tmp_path)
    assert common.relaunch_unavailable(bare, "relaunch it") == "needs a launch command to relaunch it"
    launched = Context(workdir=tmp_path, launch=LaunchSpec(("vllm", "serve", "m")),
                       launcher=object(), prompts=[])
    assert common.relaunch_unavailable(launched, "relaunch it", "send") == "no prompts to send"
    launched.prompts = ["def f():"]
    assert common.relaunch_unavailable(launched, "relaunch it") is None
