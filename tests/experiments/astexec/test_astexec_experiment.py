"""The astexec experiment: the installed vLLM's own config functions run on served configs (the
lab's DFlash drafter served with a 4-token window, recorded from a real lab server; an EAGLE3
config that names no aux layers), and its decisions on what they return."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from specdoctor.experiments.astexec import experiment as ax
from specdoctor.verdict.findings import Verdict

PROBES = Path(__file__).parents[1] / "probes" / "fixtures"
BOTH = ("attention-mask", "draft-config-mismatch")
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="needs vLLM's files (they are read, never imported)")


def _cfg(name: str) -> dict:
    return json.loads((PROBES / name).read_text())


def _view(**kw) -> ax.CodeView:
    base = {"method": "dflash", "layers": ((None, False), (None, False)),
            "metadata_causal": False, "aux_layers": (1, 2), "rope_theta": 10000.0,
            "files": {"/x/qwen3_dflash.py": "ab" * 32}}
    return ax.CodeView(**{**base, **kw})


def test_dflash_resolved_to_its_own_mask_is_excluded_and_departures_are_leads():
    cfg, target = _cfg("dflash_window_draft.json"), _cfg("dflash_target.json")
    found, leads = ax.decide(_view(), cfg, target, 2, BOTH)
    by = {f.hypothesis: f for f in found}
    assert by["attention-mask"].verdict is Verdict.EXCLUDED
    assert by["draft-config-mismatch"].verdict is Verdict.INCONCLUSIVE and not leads
    found, leads = ax.decide(_view(layers=((4, False), (4, False))), cfg, target, 2, BOTH)
    mask = next(f for f in found if f.hypothesis == "attention-mask")
    assert mask.verdict is Verdict.INCONCLUSIVE and "window 4" in mask.evidence
    assert [(x.field, x.value) for x in leads] == [("dflash_config.use_swa", False)]
    mixed = _view(layers=((None, True), (None, False)), metadata_causal=False)
    found, _ = ax.decide(mixed, {}, target, 2, ("attention-mask",))
    assert "metadata gives every layer causal=False" in found[0].evidence


def test_aux_layers_off_the_target_and_a_defaulted_theta_are_leads():
    target = _cfg("dflash_target.json")                     # 2 layers, rope theta 10000
    silent = {k: v for k, v in _cfg("dflash_window_draft.json").items()
              if k != "rope_parameters"}
    found, leads = ax.decide(_view(rope_theta=1e6), silent, target, 2, ("draft-config-mismatch",))
    assert found[0].verdict is Verdict.INCONCLUSIVE
    assert "its default" in found[0].evidence
    assert [(x.field, x.value) for x in leads] == [("rope_theta", 10000.0)]
    eagle = ax.CodeView("eagle3", aux_layers=None, default_aux=(2, 1, -1))
    found, _ = ax.decide(eagle, {}, target, 3, ("draft-config-mismatch",))
    assert "[-1] name no layer of the 2-layer target" in found[0].evidence
    wide = ax.CodeView("eagle3", aux_layers=(1,))
    found, _ = ax.decide(wide, {}, target, 3, ("draft-config-mismatch",))
    assert "fc reads 3 hidden states" in found[0].evidence


@needs_vllm
def test_the_engines_functions_on_the_served_dflash_config():
    cfg = _cfg("dflash_window_draft.json")
    v = ax.code_view("dflash", PROBES / "dflash_window_draft.json", cfg, 2)
    assert v.errors == []
    assert v.layers == ((4, False), (4, False)) and v.metadata_causal is False
    assert v.aux_layers == (1, 2) and v.rope_theta == 10000.0
    assert v.theta_default == 1000000.0          # read from the installed qwen3_dflash.py
    assert any(f.endswith("qwen3_dflash.py") for f in v.files)


@needs_vllm
def test_an_eagle3_config_without_aux_ids_gets_the_models_default(tmp_path):
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
           "num_hidden_layers": 1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    v = ax.code_view("eagle3", path, cfg, 2)
    assert v.errors == [] and v.aux_layers is None
    assert v.default_aux == (2, 1, -1)           # (2, L // 2, L - 3) on a 2-layer target
