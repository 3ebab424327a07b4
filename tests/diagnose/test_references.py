"""Reference profiles: conventions converted before any comparison."""

from __future__ import annotations

import json

import pytest

from specdoctor.diagnose import references as R
from specdoctor.errors import InputError
from tests.diagnose.recorded import counts

# What the published figures used here were measured on (references.Published).
LLAMA, QWEN, MTP8 = (R.Served("llama-3.1-8b"), R.Served("qwen3-8b"),
                     R.Served(drafter_layers=8))


def test_conditional_and_unconditional_round_trip():
    unc = R.unconditional_from_conditional([0.9, 0.8, 0.5])
    assert unc == pytest.approx([0.9, 0.72, 0.36])
    assert R.conditional_from_unconditional(unc) == pytest.approx([0.9, 0.8, 0.5])
    assert R.conditional_from_unconditional([0.5, 0.0, 0.0])[2] is None


def test_case_a_figure_reads_without_the_bonus_token():
    # 0.75 counts accepted draft tokens per step: vLLM's mean acceptance length is 1.75
    assert R.accepted_per_draft(0.75, bonus_counted=False) == 0.75
    assert R.accepted_per_draft(2.26, bonus_counted=True) == pytest.approx(1.26)


def test_sglang_num_draft_tokens_counts_the_root():
    assert R.k_from_sglang_draft_tokens(4) == 3
    with pytest.raises(InputError):
        R.k_from_sglang_draft_tokens(1)


def test_published_table_carries_conventions_and_cuts_to_k():
    ref = R.published_for("eagle3", 2, LLAMA)
    assert ref.per_position == (0.730, 0.521) and ref.source == "published"
    assert "test_acceptance_length" in ref.citation
    dflash = R.published_for("dflash", 8, QWEN)   # published as AL 2.93 with the bonus token, k=8
    assert dflash.accepted_per_draft == pytest.approx(1.93, abs=1e-6)
    assert dflash.notes and "geometric" in dflash.notes[0]
    assert "num_speculative_tokens 8" in dflash.citation
    assert R.published_for("no-such-method", 3) is None


def test_user_reference_files(tmp_path):
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"per_position": [0.9, 0.8], "conditional": True}))
    assert R.load_user_reference(f).per_position == pytest.approx((0.9, 0.72))
    f.write_text(json.dumps({"mean_acceptance_length": 0.75, "bonus_counted": False, "k": 3}))
    assert R.load_user_reference(f).accepted_per_draft == pytest.approx(0.75, abs=1e-6)
    for bad in ("not json", json.dumps([1, 2]), json.dumps({"per_position": [1.5]}),
                json.dumps({"k": 3})):
        f.write_text(bad)
        with pytest.raises(InputError):
            R.load_user_reference(f)


def test_choose_prefers_the_oracle():
    o = R.reference_from_profile(counts([0.5]), "oracle", "oracle")
    u = R.reference_from_profile(counts([0.9]), "u", "user")
    assert R.choose(None, u, R.published_for("eagle3", 1, LLAMA)) is u
    assert R.choose(o, u) is o
    assert R.choose() is None
    assert R.self_reference(counts([0.8]), 4).per_position == (0.8,)


def test_a_published_figure_is_used_only_at_the_k_of_the_server():
    """Never an 8-deep MTP figure for a server of unknown depth: no k, no published figure,
    and the reason says what to give."""
    assert R.published_for("mtp", None, MTP8) is None
    assert "k is unknown" in R.why_no_published("mtp", None, MTP8)
    three = R.published_for("mtp", 3, MTP8)
    assert three.per_position == (0.76, 0.62, 0.51) and three.k == 3
    assert "first 3 of 8 positions" in three.name and "at k=3" in three.words()
    # a server deeper than the figure: the figure keeps the positions it states
    assert R.published_for("mtp", 10, MTP8).k == 8
    # a figure published as a mean holds for its own k only, and has no stated shape
    # DFlash's AL 2.93 was measured at k=8 (the PR's serve command): not a figure for k=3
    assert R.published_for("dflash", 3, QWEN) is None
    assert "mean for k=8 only; this server has k=3" in R.why_no_published("dflash", 3, QWEN)
    assert R.published_for("dflash", 8, QWEN).shape_stated is False
    assert R.published_for("eagle3", 3, LLAMA).shape_stated is True
    assert R.why_no_published(None, 3) == "the method is unknown"
    assert R.why_no_published("eagle3", 3, LLAMA) is None


def test_a_users_mean_only_reference_has_no_stated_shape(tmp_path):
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"mean_acceptance_length": 2.6, "bonus_counted": True, "k": 3}))
    ref = R.load_user_reference(f)
    assert ref.source == "user" and ref.shape_stated is False and ref.tolerance == 0.10


def test_a_figure_is_matched_on_the_model_the_drafter_size_and_the_dataset_it_states(tmp_path):
    """Never a Llama-3.1 EAGLE3 figure for another model, nor an 8-layer MTP figure for a
    1-layer MTP head; a server whose model is not known has no published EAGLE3 figure."""
    assert R.published_for("eagle3", 3) is None
    why = R.why_no_published("eagle3", 3)
    assert "llama-3.1-8b on MT-Bench (the model is not known to be llama-3.1-8b)" in why
    llama = R.Served.of(["/models/meta-llama/Llama-3.1-8B-Instruct"])
    qwen = R.Served.of([None, "Qwen/Qwen3-8B"])
    assert R.published_for("eagle3", 3, llama).name == "llama3.1-8b-eagle3-mtbench"
    assert R.published_for("eagle3", 3, qwen).name == "qwen3-8b-eagle3-mtbench"
    assert R.Served.of(["Qwen/Qwen3-80B-A3B"]).family is None
    assert R.published_for("eagle3", 3, R.Served.of(["mistralai/Mistral-7B"])) is None
    # the drafter's size from the model's config.json (DeepSeek-style key)
    one = tmp_path / "one-layer"
    one.mkdir()
    (one / "config.json").write_text(json.dumps({"num_nextn_predict_layers": 1}))
    served = R.Served.of(["some/model"], [None, one])
    assert served.drafter_layers == 1 and R.published_for("mtp", 3, served) is None
    assert "the drafter has 1 layer(s), not 8" in R.why_no_published("mtp", 3, served)
    # prompts known to be other than the figure's: not compared
    mine = R.Served("llama-3.1-8b", dataset="specdoctor's code,essay prompts")
    assert R.published_for("eagle3", 3, mine) is None
    assert "not MT-Bench" in R.why_no_published("eagle3", 3, mine)
    # a figure that states only a dataset (Spec-Bench prompt lookup) holds for unknown prompts
    assert R.published_for("ngram", 10) is not None


def test_what_a_diagnosis_knows_of_the_server_comes_from_its_logs_and_files(tmp_path):
    from types import SimpleNamespace

    from specdoctor.experiments.base import Measured
    from tests.diagnose.recorded import VLLM_FIXTURES

    log = tmp_path / "server.log"
    real = (VLLM_FIXTURES / "lab-ngram-k3" / "server.log").read_text()
    lab_model = "/root/.cache/specdoctor/lab/models/tiny-llama-a3b7ffedd2ed"
    assert lab_model in real
    log.write_text(real.replace(lab_model, "/models/Meta-Llama-3.1-8B-Instruct"))
    ctx = SimpleNamespace(settings=None, target_dir=None, draft_dir=None, logs=(log,),
                          measured=Measured(), suite="code")
    assert R.served_of(ctx) == R.Served("llama-3.1-8b")
    ctx.logs = (VLLM_FIXTURES / "lab-ngram-k3" / "server.log",)   # the lab's tiny model
    ctx.measured.greedy = object()
    assert R.served_of(ctx) == R.Served(None, None, "specdoctor's code prompts")
