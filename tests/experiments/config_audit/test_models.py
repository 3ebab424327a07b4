"""The model audit on the lab's real model directories (hand-wired control drafters, the
catalogue's faults applied to copies of them) and on edited copies: no server, no vLLM."""

from __future__ import annotations

import json
import shutil

import pytest

from specdoctor.errors import InputError
from specdoctor.experiments.config_audit import models as m
from specdoctor.lab import drafters, faults
from specdoctor.served_files import read_config


@pytest.fixture(scope="module")
def dflash_pair():
    served = drafters.serve("dflash", control="pos0")
    return served


def _levels(audit: m.ModelAudit) -> dict[str, str]:
    return {f.check: f.level for f in audit.findings}


def test_healthy_dflash_drafter_fits(dflash_pair):
    a = m.audit_models(dflash_pair.target, dflash_pair.draft, "dflash")
    assert a.worst() == "ok", a.to_json()
    aux = next(f for f in a.findings if f.check == "aux layer ids")
    cfg = read_config(dflash_pair.draft)
    assert aux.draft == [i + 1 for i in cfg["dflash_config"]["target_layer_ids"]]


@pytest.mark.parametrize("fault, check", [
    ("dflash-causal", "dflash causality"),
    ("dflash-window", "attention window"),
    ("dflash-layer-ids", "aux layer ids"),
])
def test_each_dflash_fault_is_a_suspect_with_its_check(dflash_pair, fault, check):
    served = faults.get(fault).apply(dflash_pair)
    a = m.audit_models(served.target, served.draft, "dflash")
    assert _levels(a)[check] == "suspect", a.to_json()
    assert [f.check for f in a.suspects()] == [check]  # and nothing else is blamed


def test_rope_difference_in_a_same_family_drafter_is_a_suspect(tmp_path, dflash_pair):
    draft = tmp_path / "draft"
    shutil.copytree(dflash_pair.draft, draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 1000.0}
    cfg.pop("rope_theta", None)
    (draft / "config.json").write_text(json.dumps(cfg))
    a = m.audit_models(dflash_pair.target, draft, "dflash")
    rope = next(f for f in a.findings if f.check == "rope")
    assert rope.level == "suspect"
    assert rope.target["rope_theta"] == 10000.0 and rope.draft["rope_theta"] == 1000.0


def test_independent_drafter_of_another_shape_is_info_not_suspect(tmp_path, dflash_pair):
    # the Qwen3 control target against a smaller copy of itself as an independent draft model
    draft = tmp_path / "small"
    shutil.copytree(dflash_pair.target, draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["num_hidden_layers"] = 1
    (draft / "config.json").write_text(json.dumps(cfg))
    a = m.audit_models(dflash_pair.target, draft, "draft_model")
    assert _levels(a)["num_hidden_layers"] == "info"
    assert a.worst() == "info"
    cfg["rope_theta"] = 500000.0
    cfg.pop("rope_parameters", None)
    (draft / "config.json").write_text(json.dumps(cfg))
    assert _levels(m.audit_models(dflash_pair.target, draft, "draft_model"))["rope"] == "suspect"


def test_tokenizer_mismatch_without_a_map_is_a_problem(tmp_path, dflash_pair):
    draft = tmp_path / "draft"
    shutil.copytree(dflash_pair.target, draft)
    tok = json.loads((draft / "tokenizer.json").read_text()) if (
        draft / "tokenizer.json").is_file() else None
    if tok is None:
        pytest.skip("the lab target carries no tokenizer.json")
    vocab = tok["model"]["vocab"]
    a, b = list(vocab)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (draft / "tokenizer.json").write_text(json.dumps(tok))
    res = m.audit_models(dflash_pair.target, draft, "draft_model")
    assert _levels(res)["tokenizer"] == "problem"


def test_missing_config_names_the_fix(tmp_path, dflash_pair):
    with pytest.raises(InputError, match="no config.json"):
        m.audit_models(dflash_pair.target, tmp_path, "dflash")
    with pytest.raises(InputError, match="unknown method"):
        m.audit_models(dflash_pair.target, dflash_pair.draft, "medusa2")
