"""Contract leads decided by their oracle counterfactual, offline, on hand-wired drafters (no
training, no server): a layer-id fault that every file check passes, caught by the search over
layer sets; a DFlash mask token naming ordinary text, caught by the tokenizer's reference.

The healthy twin of each stays unconfirmed: the search finds nothing better than the right set
(ties are said), the right placeholder token is no lead.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specdoctor.bench.prompts import take  # noqa: E402
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.common import Settings  # noqa: E402
from specdoctor.experiments.counterfactual import OracleCounterfactual  # noqa: E402
from tests.experiments.contract import layered  # noqa: E402

HYPS = ("draft-config-mismatch", "attention-mask")


def _ctx(tmp: Path, method: str, target: Path, draft: Path) -> Context:
    from specdoctor.lab.drafters import targets

    tok = targets.tokenizer_dir()
    return Context(workdir=tmp / "work", method=method, k=3, target_dir=target, draft_dir=draft,
                   tokenizer_dir=tok, prompts=tuple(take("code", 4)), max_tokens=32,
                   settings=Settings(target, method, 3, draft, tok, (2, 4), "float32", None,
                                     "greedy"))


def _finding(result, hypothesis):
    (f,) = [f for f in result.findings if f.hypothesis == hypothesis]
    return f


def test_in_range_layer_ids_are_caught_by_the_search_and_confirmed(tmp_path):
    target, head = layered.build(tmp_path / "wrong", [0, 1, 2])
    r = OracleCounterfactual().run(_ctx(tmp_path, "eagle3", target, head), HYPS)
    f = _finding(r, "draft-config-mismatch")
    assert f.verdict is Verdict.CONFIRMED and f.basis == "counterfactual"
    assert "searched 9 sets of 3 target layers" in f.evidence
    assert "held out on the other half 0.000 → 1.000" in f.evidence
    found = r.numbers["trials"]["search eagle_aux_hidden_state_layer_ids"]
    assert found["best"] == [1, 2, 3] and found["served"] == [0, 1, 2]
    assert found["confirm"] == {"before": 0.0, "after": 1.0}
    # what the files allowed is said: nothing in them could tell
    assert any("no file says which layers" in c for c in r.numbers["review"]["checked"])


def test_the_right_layer_ids_are_not_beaten_by_the_search(tmp_path):
    target, head = layered.build(tmp_path / "right", [1, 2, 3])
    r = OracleCounterfactual().run(_ctx(tmp_path, "eagle3", target, head), HYPS)
    f = _finding(r, "draft-config-mismatch")
    assert f.verdict is Verdict.EXCLUDED and "no set recovers on the held-out half" in f.evidence
    found = r.numbers["trials"]["search eagle_aux_hidden_state_layer_ids"]
    assert [2, 3, 4] in found["ties"] or found["best"] in ([1, 2, 4], [1, 3, 4], [2, 3, 4])


def test_a_mask_token_of_ordinary_text_is_caught_and_the_special_token_recovers(tmp_path):
    from specdoctor.lab.drafters import dflash

    target, src = dflash.control("pos0")
    ok = OracleCounterfactual().run(_ctx(tmp_path, "dflash", target, src), HYPS)
    assert "mask_token_id" not in json.dumps(ok.numbers["review"]["suspects"])
    head = tmp_path / "head"
    shutil.copytree(src, head, ignore=shutil.ignore_patterns("specdoctor*"))
    cfg = json.loads((head / "config.json").read_text())
    cfg["dflash_config"]["mask_token_id"] = 300          # an ordinary token of the tokenizer
    (head / "config.json").write_text(json.dumps(cfg))
    r = OracleCounterfactual().run(_ctx(tmp_path, "dflash", target, head), HYPS)
    f = _finding(r, "draft-config-mismatch")
    assert f.verdict is Verdict.CONFIRMED and f.basis == "counterfactual"
    assert f.evidence.startswith("dflash_config.mask_token_id 300 → 2 (oracle)")
