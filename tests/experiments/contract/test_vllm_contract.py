"""The contract read out of the installed vLLM (0.32 here): the keys, defaults, normalisations
and tensor rules it finds for each method are vLLM's own, each cited with the file's sha256; the
oracle's loaders read nothing vLLM does not, except the spellings named here."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from specdoctor.experiments.contract import contract as contract_mod
from specdoctor.experiments.contract import scope
from specdoctor.experiments.contract.reads import Cfg, Lit, Seeds, SourceIndex, Walker

ROOT = scope.vllm_root()
pytestmark = pytest.mark.skipif(ROOT is None, reason="vLLM is not installed here "
                                "(scripts/install.sh lab): its source is what is read")

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
         "num_hidden_layers": 7, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 32, "intermediate_size": 384, "hidden_act": "silu", "rms_norm_eps": 1e-6,
         "vocab_size": 1024, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}}
QWEN3 = {**LLAMA, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
EAGLE3 = {**LLAMA, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
          "draft_vocab_size": 512, "target_hidden_size": 128,
          "eagle_aux_hidden_state_layer_ids": [0, 1, 2],
          "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 2],
                           "use_aux_hidden_state": True}}
DFLASH = {**QWEN3, "architectures": ["DFlashDraftModel"], "num_hidden_layers": 2,
          "dflash_config": {"mask_token_id": 2, "target_layer_ids": [0, 1]}}
MIMO = {**QWEN3, "architectures": ["MiMoForCausalLM"], "model_type": "qwen2",
        "num_nextn_predict_layers": 1}


def _reads(c: contract_mod.Contract, key: str) -> list:
    return c.reads_of(key)


def test_eagle3_reads_its_layer_ids_flags_and_the_rope_through_get_rope():
    c = contract_mod.build("eagle3", EAGLE3, LLAMA)
    assert c.model_class == "vllm.model_executor.models.llama_eagle3.Eagle3LlamaForCausalLM"
    for key in ("eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids",
                "eagle_config.use_aux_hidden_state", "norm_before_residual", "fc_norm",
                "rms_norm_eps", "hidden_act", "rope_parameters.partial_rotary_factor"):
        assert c.is_read(key), key
    assert c.default("logit_scale") == (True, 1.0)
    assert c.default("norm_before_residual") == (True, False)
    assert c.default("rope_parameters.partial_rotary_factor") == (True, 1.0)
    # a key no code of the method reads
    assert not c.is_read("bos_token_id") and not c.is_read("tie_word_embeddings")
    rules = {t.pattern: t for t in c.tensors}
    assert rules["t2d"].flag is None          # vLLM never loads t2d
    assert rules["fc."].flag == Cfg("eagle_config.use_aux_hidden_state", Lit(True))
    assert rules["fc."].keep_when is True and rules["input_norm."].flag is not None


def test_the_aux_layer_rules_come_out_of_vllms_functions():
    c = contract_mod.build("eagle3", EAGLE3, LLAMA)
    assert c.aux is not None
    assert c.aux.default == (2, 3, 4)         # (2, L // 2, L - 3) for L = 7
    assert (c.aux.lo, c.aux.hi) == (0, 7)      # the embeddings .. the last layer's output
    assert "sorted(set(" in (c.aux.normalise or "")
    d = contract_mod.build("dflash", DFLASH, QWEN3)
    assert d.aux is not None and d.aux.offsets["dflash_config.target_layer_ids"] == 1
    assert "each + 1" in d.normalisations("dflash_config.target_layer_ids")


def test_dflash_reads_its_mask_token_window_and_causality():
    c = contract_mod.build("dflash", DFLASH, QWEN3)
    assert c.model_class == "vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM"
    for key in ("dflash_config.mask_token_id", "dflash_config.use_swa", "dflash_config.causal",
                "is_neox_style", "layer_types"):
        assert c.is_read(key), key
    assert c.default("dflash_config.use_swa") == (True, False)
    assert not c.is_read("use_sliding_window")    # Qwen3's flag: the DFlash model ignores it


def test_mtp_is_read_through_the_architecture_vllm_gives_the_targets_config():
    c = contract_mod.build("mtp", MIMO, MIMO)
    assert c.model_class == "vllm.model_executor.models.mimo_mtp.MiMoMTP"
    assert c.is_read("num_nextn_predict_layers")


def test_every_read_is_cited_with_the_sha256_of_its_file():
    c = contract_mod.build("dflash", DFLASH, QWEN3)
    cited = {f["file"]: f["sha256"] for f in c.files}
    assert "vllm/model_executor/models/qwen3_dflash.py" in cited
    for rel, sha in cited.items():
        path = ROOT.parent / rel
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert all(r.where.split(":", 1)[0] in cited for r in c.reads)


def test_a_key_added_to_vllms_model_file_is_found(tmp_path):
    """What the static pass buys over a list: a read vLLM adds is a read here."""
    src = (ROOT / "model_executor/models/llama_eagle3.py").read_text()
    anchor = "        self.norm_output = getattr(self.config, \"norm_output\", False)\n"
    assert anchor in src
    added = src.replace(anchor, anchor + "        self.knob = getattr(self.config, "
                                         "\"new_knob\", 0.5)\n")
    pkg = tmp_path / "vllm" / "model_executor" / "models"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "vllm", pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "llama_eagle3.py").write_text(added)
    index = SourceIndex(tmp_path / "vllm", "vllm")
    w = Walker(index, scope.MODEL_SEEDS)
    mod, cls = index.find_class("vllm.model_executor.models.llama_eagle3", "Eagle3LlamaForCausalLM")
    w.instantiate(mod, cls)
    (knob,) = [r for r in w.found.reads if r.key == "new_knob"]
    assert knob.default == "0.5"


# The oracle reads these and vLLM does not: transformers folds a top-level rope_theta into
# rope_parameters before vLLM sees the config; the MTP oracle ties its LM head itself, where
# vLLM's target (not the drafter) reads tie_word_embeddings.
ORACLE_ONLY = {"eagle3": {"rope_theta"}, "dflash": {"rope_theta"},
               "mtp": {"rope_theta", "tie_word_embeddings"}}


@pytest.mark.parametrize("method,draft,target", [("eagle3", EAGLE3, LLAMA),
                                                 ("dflash", DFLASH, QWEN3),
                                                 ("mtp", MIMO, MIMO)])
def test_the_oracles_loaders_read_nothing_vllm_does_not(method, draft, target):
    c = contract_mod.build(method, draft, target)
    assert c.oracle_keys is not None
    extra = {k for k in c.oracle_keys if not c.is_read(k) and "." not in k}
    assert extra <= ORACLE_ONLY[method], extra
    # and what vLLM reads that the oracle does not is known: an oracle counterfactual on it
    # would show nothing, so such a lead goes to the relaunch
    assert c.oracle_reads("hidden_act") is False


def test_a_read_in_a_stub_package_is_reported_with_its_line(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(textwrap.dedent('''
        def f(draft_hf_config):
            return getattr(draft_hf_config, "x", 3)
    '''))
    index = SourceIndex(pkg, "p")
    w = Walker(index, Seeds(names=("draft_hf_config",)))
    mod = index.module("p.m")
    assert mod is not None
    w.function(mod, mod.defs["f"])  # type: ignore[arg-type]
    (r,) = w.found.reads
    assert r.where == "p/m.py:3 (f)" and r.default == "3"
