"""vocab-map-check on a GGUF pair: llama.cpp's own compatibility rules on the two files. A
drafter llama.cpp refuses, on a server that drafted nothing, is the cause; the same pair on a
server that drafted keeps the verdict it had, with the refusal said beside it."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("gguf", "torch", "transformers")),
    reason="needs gguf, torch and transformers (bash scripts/install.sh test)")


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """The lab's tiny target as GGUF, and a copy whose tokenizer gives ids 300 and 301 each
    other's text (a drafter of another vocabulary)."""
    from specdoctor.lab import gguf_export
    from specdoctor.lab.models import target_model

    src = target_model()
    d = tmp_path / "m2"
    shutil.copytree(src, d)
    tok = json.loads((d / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = [s for s, i in vocab.items() if i in (300, 301)]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    return gguf_export.exported(src, "f32"), gguf_export.exported(d, "f32")


def _result(tmp_path: Path, drafted: int) -> object:
    from specdoctor.acceptance.profile import AcceptanceProfile
    from specdoctor.bench.measure import Measurement, MeasureParams
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.vocab import HID, _llamacpp_refusal
    from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict

    target, draft = _pair(tmp_path)
    ctx = Context(workdir=tmp_path, engine="llamacpp", gguf={"target": target, "draft": draft})
    m = Measurement(url="u", model="m", params=MeasureParams())
    m.total = AcceptanceProfile(drafts=drafted, draft_tokens=4 * drafted, accepted_tokens=0)
    ctx.measured.greedy = m
    given = ExperimentResult("vocab-map-check", [Finding(HID, Verdict.INCONCLUSIVE, "as found")])
    return _llamacpp_refusal(ctx, given)


def test_a_refused_drafter_on_a_server_that_drafted_nothing_is_the_cause(tmp_path: Path) -> None:
    r = _result(tmp_path, drafted=0)
    f = r.findings[0]
    assert f.verdict.value == "confirmed" and f.basis == "comparison"
    assert "refuses this drafter" in f.evidence and "ids 300, 301" in f.evidence
    assert r.numbers["llamacpp_refuses"]


def test_a_refused_pair_that_drafted_keeps_its_verdict(tmp_path: Path) -> None:
    f = _result(tmp_path, drafted=10).findings[0]
    assert f.verdict.value == "inconclusive" and "refuses this drafter" in f.evidence


def test_a_refusal_accounts_for_every_token_the_oracle_drafts(tmp_path: Path) -> None:
    """A refused drafter on a server that drafted nothing is sized against the oracle of the
    served files: the whole gap, so rule cause-sized keeps it the root cause even where the
    vocabulary check's own counterfactual (ids translated inside the oracle) recovered little."""
    from specdoctor.acceptance.profile import AcceptanceProfile
    from specdoctor.bench.measure import Measurement, MeasureParams
    from specdoctor.bench.prompts import take
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.common import Settings
    from specdoctor.experiments.vocab import HID, _llamacpp_refusal, as_served_map
    from specdoctor.lab.models import target_model
    from specdoctor.verdict import rules, sizing
    from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict

    target, draft = _pair(tmp_path)
    ctx = Context(workdir=tmp_path, engine="llamacpp", gguf={"target": target, "draft": draft},
                  method="draft_model", k=2, target_dir=target_model(),
                  draft_dir=tmp_path / "m2", tokenizer_dir=target_model(),
                  prompts=tuple(take("code", 4)), max_tokens=24,
                  settings=Settings(target_model(), "draft_model", 2, tmp_path / "m2", None,
                                    (2, 4), "float32", 1024, "greedy"))
    m = Measurement(url="u", model="m", params=MeasureParams())
    m.total = AcceptanceProfile(drafts=0, draft_tokens=0, accepted_tokens=0)
    ctx.measured.greedy = m
    ctx.oracle_vocab_map = as_served_map(ctx)   # as the diagnosis sets it
    small = sizing.Size(0.02, how="counterfactual: ids translated (oracle)")
    given = ExperimentResult("vocab-map-check", [Finding(HID, Verdict.CONFIRMED, "as found",
                                                         basis="counterfactual", size=small)])
    f = _llamacpp_refusal(ctx, given).findings[0]
    assert f.basis == "comparison" and f.size is not None and f.size.loss > 0.5
    ask = sizing.asked(0.0, f.size.loss, ((HID, small.loss),))
    a = rules.answer([f], needs_cause=True, asked={"greedy": ask})
    assert a.root == HID and a.explains[HID]["share_of_gap"] == 1.0
    # the counterfactual's own size, kept, would have left it "also found"
    a = rules.answer([replace(f, size=small)], needs_cause=True, asked={"greedy": ask})
    assert a.root is None and a.also
