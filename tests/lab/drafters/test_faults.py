"""The fault catalogue: complete, well-formed, and applied to a copy of the drafter only."""

from __future__ import annotations

import json

import pytest

from specdoctor.errors import LabError
from specdoctor.lab import drafters, faults, lab, patches


def test_catalogue_covers_every_root_cause_with_valid_entries():
    assert {f.root_cause for f in faults.FAULTS.values()} == set(faults.ROOT_CAUSES)
    for f in faults.FAULTS.values():
        assert f.method in lab.METHODS
        # each changes something
        assert f.config or f.config_edit or f.tensor_edit or f.k or f.runtime_patch, f.id
        assert f.id.startswith(f.method.split("_")[0])
        if f.runtime_patch:
            assert f.runtime_patch in patches.available(), f.id
    rows = faults.catalogue()
    assert [r["id"] for r in rows] == list(faults.FAULTS)
    json.dumps(rows)  # plain data


def test_unknown_fault_and_wrong_method_name_the_choices():
    with pytest.raises(LabError, match="choose one of"):
        faults.get("nope")
    served = drafters.Served("mtp", target=__import__("pathlib").Path("/x"), draft=None,
                             tokenizer=__import__("pathlib").Path("/t"))
    with pytest.raises(LabError, match="not mtp"):
        faults.get("dflash-causal").apply(served)


torch = pytest.importorskip("torch")


def test_config_fault_patches_a_copy_and_keeps_the_weights():
    from specdoctor.lab.drafters import cache

    healthy = drafters.serve("dflash", control="pos0")
    sick = faults.serve("dflash", control="pos0", fault="dflash-causal")
    assert sick.target == healthy.target and sick.draft != healthy.draft
    assert sick.tags == healthy.tags == ("control=pos0",) and sick.fault == "dflash-causal"
    cfg = json.loads((sick.draft / "config.json").read_text())
    assert cfg["dflash_config"]["causal"] is True
    assert "causal" not in json.loads((healthy.draft / "config.json").read_text())["dflash_config"]
    a, b = cache.load_tensors(healthy.draft), cache.load_tensors(sick.draft)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_layer_id_fault_shifts_every_id_down_by_one():
    healthy = drafters.serve("dflash", control="pos0")
    sick = faults.serve("dflash", control="pos0", fault="dflash-layer-ids")
    ids = [json.loads((d / "config.json").read_text())["dflash_config"]["target_layer_ids"]
           for d in (healthy.draft, sick.draft)]
    assert [i - 1 for i in ids[0]] == ids[1]


def test_d2t_fault_moves_every_draft_id_one_target_id_up():
    from specdoctor.lab.drafters import cache

    healthy = drafters.serve("eagle3", control="pos0")
    sick = faults.serve("eagle3", control="pos0", fault="eagle3-d2t-off-by-one")
    a, b = cache.load_tensors(healthy.draft), cache.load_tensors(sick.draft)
    assert torch.equal(b["d2t"] - a["d2t"], torch.ones_like(a["d2t"]))


def test_k_fault_changes_only_k():
    from specdoctor.lab import lab

    healthy = drafters.serve("mtp", control="pos0")
    sick = faults.serve("mtp", control="pos0", fault="mtp-k-beyond-training")
    assert (sick.target, sick.draft) == (healthy.target, healthy.draft)
    assert lab.default_k("mtp", fault="mtp-k-beyond-training") == 6
    assert lab.default_k("mtp") == drafters.TRAINED_K["mtp"] == 2
