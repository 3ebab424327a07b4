"""astexec on the real DFlash functions of the installed vLLM, fed drafter config.json files.

Fixtures: dflash_qwen3_8b_b16.json is written from the fields the published Qwen3-8B
DFlash drafter (z-lab/Qwen3-8B-DFlash-b16) carries: 5 layers, full attention,
dflash_config.target_layer_ids (not downloaded here: the machine has no hub access,
so compare with the hub copy before quoting its numbers); the SWA one
mirrors Case A's drafter (6 aux layers, sliding window, non-causal); the mixed one
has sliding and full layers, the branch that needs the V2 model runner.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import pytest

from specdoctor.experiments.astexec.cut import cut_definitions
from specdoctor.experiments.astexec.run import astexec, resolve_file

FIX = Path(__file__).parent / "fixtures"
MODEL = "vllm.model_executor.models.qwen3_dflash"
EAGLE3 = "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm")

LAYERS = "[{f}(config, i) for i in range(config.num_hidden_layers)]"


def _cfg(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def _def_line(path: Path, name: str) -> int:
    lines = path.read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if line.startswith(f"def {name}("))


def test_cut_finds_the_annotation_only_stub_and_the_guarded_call():
    path = resolve_file(MODEL)
    cut = cut_definitions(path, ["_dflash_layer_causal", "_resolve_layer_attention"])
    assert cut.stubs == {"Qwen3Config": ["annotation"], "get_current_vllm_config": ["body"]}
    by_name = {s.name: s for s in cut.segments}
    assert by_name["_dflash_layer_causal"].start == _def_line(path, "_dflash_layer_causal")
    assert "_SLIDING_ATTENTION" in by_name  # a module constant the functions read


def _run(config: str, calls: list[str], **kw) -> dict:
    return astexec(MODEL, ["_dflash_layer_causal", "_resolve_layer_attention",
                           "dflash_has_any_non_causal"],
                   calls=calls, config_path=FIX / config, **kw)


def test_full_attention_drafter_is_non_causal_without_windows():
    out = _run("dflash_qwen3_8b_b16.json",
               [LAYERS.format(f="_dflash_layer_causal"), LAYERS.format(f="_resolve_layer_attention"),
                "dflash_has_any_non_causal(config)"],
               stubs=["get_current_vllm_config=raise"])
    n = _cfg("dflash_qwen3_8b_b16.json")["num_hidden_layers"]
    causal, resolved, any_non_causal = (c["value"] for c in out["calls"])
    assert causal == [False] * n
    assert resolved == [[None, False]] * n
    assert any_non_causal is True
    # The raise stub was never used: the mixed-layer branch is not taken for this drafter.
    assert out["stubs"]["get_current_vllm_config"]["uses"] == []
    # Annotations run at def time: the stub was needed although no call touches it.
    assert out["stubs"]["Qwen3Config"]["loaded_at_def"] is True
    assert out["isolation"]["env"] == "empty"


def test_swa_drafter_gets_its_window_and_stays_non_causal():
    cfg = _cfg("dflash_swa_noncausal.json")
    out = _run("dflash_swa_noncausal.json", [LAYERS.format(f="_resolve_layer_attention")],
               stubs=["get_current_vllm_config=raise"])
    window = cfg["dflash_config"]["swa_window_size"]
    assert out["calls"][0]["value"] == [[window, False]] * cfg["num_hidden_layers"]


def test_mixed_layers_take_the_guarded_branch():
    out = _run("dflash_mixed.json", [LAYERS.format(f="_dflash_layer_causal"),
                                     "_resolve_layer_attention(config, 0)"],
               stubs=["get_current_vllm_config=raise"])
    types = _cfg("dflash_mixed.json")["layer_types"]
    assert out["calls"][0]["value"] == [t == "sliding_attention" for t in types]
    err = out["calls"][1]["error"]
    assert err["type"] == "StubRaised"
    assert "get_current_vllm_config" in err["at"]["code"]
    assert out["stubs"]["get_current_vllm_config"]["raised"] is True
    # With a value instead of raise, the V1 runner refusal is reached, from the real code.
    out = _run("dflash_mixed.json", ["_resolve_layer_attention(config, 0)"],
               stubs=["get_current_vllm_config=lambda: SimpleNamespace(use_v2_model_runner=False)"])
    assert out["calls"][0]["error"]["type"] == "NotImplementedError"
    assert "VLLM_USE_V2_MODEL_RUNNER" in out["calls"][0]["error"]["message"]


@pytest.mark.parametrize("config", ["dflash_qwen3_8b_b16.json", "dflash_swa_noncausal.json"])
def test_aux_layer_ids_are_target_layer_ids_plus_one(config):
    out = astexec(EAGLE3, ["get_eagle3_aux_layers_from_config"], config_path=FIX / config,
                  calls=["get_eagle3_aux_layers_from_config("
                         "SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=config)))"])
    ids = _cfg(config)["dflash_config"]["target_layer_ids"]
    assert out["calls"][0]["value"] == [i + 1 for i in ids]
    assert out["stubs"]["SpeculativeConfig"]["needed_for"] == ["annotation"]


def test_method_of_a_class_with_a_stubbed_base():
    out = astexec(MODEL, ["DFlashQwen3ForCausalLM.get_draft_attn_causal"],
                  calls=["DFlashQwen3ForCausalLM.get_draft_attn_causal(SimpleNamespace(model="
                         "SimpleNamespace(layers=[SimpleNamespace(self_attn=SimpleNamespace("
                         "causal=c)) for c in (True, False, False)])))"])
    assert out["definition_errors"] == []
    assert out["calls"][0]["value"] == [True, False, False]
    assert any(u["op"] == "base" for u in out["stubs"]["Qwen3ForCausalLM"]["uses"])


def test_hf_config_class_builds_the_real_config_object():
    pytest.importorskip("transformers")
    out = _run("dflash_qwen3_8b_b16.json", [LAYERS.format(f="_resolve_layer_attention"),
                                            "type(config).__name__"],
               config_class="transformers.Qwen3Config", stubs=["get_current_vllm_config=raise"])
    assert out["calls"][1]["value"] == "Qwen3Config"
    n = _cfg("dflash_qwen3_8b_b16.json")["num_hidden_layers"]
    assert out["calls"][0]["value"] == [[None, False]] * n


def test_stubbed_run_agrees_with_the_imported_engine():
    """The same functions imported for real (slow: imports vLLM) give the same answers."""
    transformers = pytest.importorskip("transformers")
    real = importlib.import_module(MODEL)
    eagle3 = importlib.import_module(EAGLE3)
    from types import SimpleNamespace

    for name in ("dflash_qwen3_8b_b16.json", "dflash_swa_noncausal.json"):
        cfg = transformers.Qwen3Config.from_dict(_cfg(name))
        n = cfg.num_hidden_layers
        expected = [
            [real._dflash_layer_causal(cfg, i) for i in range(n)],
            [list(real._resolve_layer_attention(cfg, i)) for i in range(n)],
            list(eagle3.get_eagle3_aux_layers_from_config(
                SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=cfg)))),
        ]
        out = _run(name, [LAYERS.format(f="_dflash_layer_causal"),
                          LAYERS.format(f="_resolve_layer_attention")])
        aux = astexec(EAGLE3, ["get_eagle3_aux_layers_from_config"], config_path=FIX / name,
                      calls=["get_eagle3_aux_layers_from_config("
                             "SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=config)))"])
        got = [c["value"] for c in out["calls"]] + [aux["calls"][0]["value"]]
        assert got == expected, name
