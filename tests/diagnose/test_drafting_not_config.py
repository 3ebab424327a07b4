"""Rule drafting-not-config in the plan: a replay that finds the engine's drafts differ from the
drafter's chain does not close the plan while the drafter's contract (read from the installed
vLLM's source, on real config and tokenizer files) names a lead on a served field with the value
to set; the relaunch with that value runs and its recovery decides, and the drafting loss is
then ordered against the recovery in one unit.

The experiments are stand-ins that return findings (the replay's figures are those of the
DFlash drafter served with an ordinary-token mask id, re-scored from its engine trace); the
contract review that decides whether the plan goes on is the real one."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.diagnose import catalogue as C
from specdoctor.diagnose import orchestrator, settle
from specdoctor.diagnose.ledger import build
from specdoctor.diagnose.references import reference_from_profile
from specdoctor.diagnose.signature import Facts, classify
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from tests.diagnose.recorded import counts
from tests.diagnose.test_orchestrator_plan import Inconclusive

QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 128,
         "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1024, "rms_norm_eps": 1e-6,
         "max_position_embeddings": 2048, "bos_token_id": 0, "eos_token_id": 1,
         "pad_token_id": 2, "tie_word_embeddings": False,
         "layer_types": ["full_attention", "full_attention"],
         "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}}
DFLASH = {**QWEN3, "architectures": ["DFlashDraftModel"], "block_size": 4,
          "target_hidden_size": 128, "dflash_config": {"mask_token_id": 2,
                                                       "target_layer_ids": [0, 1]}}
MEASURED = counts([0.40, 0.20, 0.08])        # the served drafter, greedy
ORACLE = counts([0.46, 0.23, 0.09])          # the oracle of the served files
RECOVERED = counts([0.61, 0.39, 0.18])       # the relaunch with the trained mask id
# The replay of that case: a correct verifier accepts 0.657 per step from the drafter's own
# chain, 0.612 from the engine's drafts, on the engine's 268 steps.
DRAFTING = {"steps": 268, "differ": 108, "expected_engine": 0.612, "expected_chain": 0.657,
            "differs": True}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab tokenizer (<|bos|>, <|eos|>, <|pad|> = 0, 1, 2, then ordinary BPE tokens)."""
    from specdoctor.lab.models import _build_tokenizer

    out = tmp_path_factory.mktemp("tok") / "tok"
    _build_tokenizer(out, 1024)
    return out


class Replay:
    id = "replay"

    def unavailable(self, ctx):
        return None

    def run(self, ctx, hypotheses):
        return ExperimentResult(self.id, [
            Finding("engine-drafting", Verdict.CONFIRMED, "108 of 268 steps differ",
                    recovered=1.0, basis="replay"),
            Finding("rejection-sampler", Verdict.EXCLUDED, "no position differs",
                    basis="replay")],
            {"localisation": {"drafting": {"greedy": DRAFTING}}})


class Relaunch:
    id = "relaunch-counterfactual"

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def unavailable(self, ctx):
        return None

    def run(self, ctx, hypotheses):
        from specdoctor.experiments import common
        from specdoctor.verdict import rules

        self.asked.append(tuple(hypotheses))
        before, after = common.apd(MEASURED), common.apd(RECOVERED)
        return ExperimentResult(self.id, [rules.decide_counterfactual(
            "draft-config-mismatch", "dflash_config.mask_token_id 500 → 2 (relaunched)",
            before, after, 3.0, True)], curves={"before": MEASURED, "after mask": RECOVERED})


def _plan(tmp_path: Path, tokenizer: Path, mask: int, monkeypatch) -> tuple[object, Relaunch]:
    d, t = tmp_path / "draft", tmp_path / "target"
    d.mkdir()
    t.mkdir()
    (t / "config.json").write_text(json.dumps(QWEN3))
    cfg = json.loads(json.dumps(DFLASH))
    cfg["dflash_config"]["mask_token_id"] = mask
    (d / "config.json").write_text(json.dumps(cfg))
    ctx = Context(workdir=tmp_path, prompts=("def add(a, b):\n    return a + b",
                                             "The river ran past the old mill."))
    ctx.method, ctx.k = "dflash", 3
    ctx.draft_dir, ctx.target_dir, ctx.tokenizer_dir = d, t, tokenizer
    ctx.measured.greedy = SimpleNamespace(total=MEASURED)
    facts = Facts(MEASURED, reference_from_profile(ORACLE, "oracle", "oracle"), method="dflash")
    sig = classify(facts)
    cat = C.load()
    ledger = build(sig, cat, 2.0, also=settle.kept_candidates(ctx, facts))
    assert ledger.entry("engine-drafting") and ledger.entry("draft-config-mismatch")
    relaunch = Relaunch()
    real = {"replay": Replay(), "relaunch-counterfactual": relaunch}
    monkeypatch.setattr(C, "experiment", lambda spec: real.get(spec.id, Inconclusive()))
    orchestrator._run_plan(ctx, ledger, cat, orchestrator.Options(workdir=tmp_path,
                                                                  budget_min=60.0),
                           time.monotonic(), None, orchestrator.Saver(None, orchestrator.Target()))
    settle.restate_drafting(ctx, ledger)
    return ledger, relaunch


def test_a_contract_lead_is_relaunched_before_drafting_closes_the_plan(tmp_path, tokenizer,
                                                                         monkeypatch):
    """mask_token_id 500 names an ordinary token: the contract's lead (set it to the pad
    token) is relaunched although the replay confirmed a drafting difference; the relaunch
    recovers, so the served field is the root cause and the drafting loss, restated in the same
    unit, is the smaller other cause."""
    ledger, relaunch = _plan(tmp_path, tokenizer, 500, monkeypatch)
    assert relaunch.asked and "draft-config-mismatch" in relaunch.asked[0]
    cfg = ledger.entry("draft-config-mismatch")
    assert cfg.verdict is Verdict.CONFIRMED and cfg.basis == "counterfactual"
    assert any("[rule:drafting-not-config]" in ev for ev in cfg.evidence)
    drafting = ledger.entry("engine-drafting")
    assert drafting.verdict is Verdict.CONFIRMED and drafting.basis == "replay"
    # 0.045 accepted per step of the room 3 - 0.68: about 2%, against the relaunch's 21%
    assert drafting.recovered == pytest.approx(0.045 / (3 - 0.68), abs=0.002)
    assert "not measured again with draft-config-mismatch fixed" in drafting.evidence[-1]
    assert ledger.root_cause() == ("draft-config-mismatch", ["engine-drafting"])
    # once the symptom is explained, only the held cause's relaunch runs
    ran = [r.experiment for r in ledger.results]
    after = ran[ran.index("replay") + 1:]
    assert after == ["rule:drafting-not-config", "relaunch-counterfactual"], ran


def test_without_a_named_lead_the_drafting_verdict_closes_the_plan(tmp_path, tokenizer,
                                                                   monkeypatch):
    """The trained mask id (the pad token): the contract names no value to set (its layer-id
    lead is a search, which names none), so the replay's verdict closes the plan as before."""
    ledger, relaunch = _plan(tmp_path, tokenizer, 2, monkeypatch)
    assert relaunch.asked == []
    assert ledger.entry("draft-config-mismatch").verdict is not Verdict.CONFIRMED
    assert ledger.root_cause()[0] == "engine-drafting"
    assert ledger.entry("engine-drafting").recovered == 1.0
