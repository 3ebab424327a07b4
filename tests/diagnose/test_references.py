"""Reference profiles: conventions converted before any comparison."""

from __future__ import annotations

import json

import pytest

from specdoctor.diagnose import references as R
from specdoctor.errors import InputError
from tests.diagnose.recorded import counts


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
    ref = R.published_for("eagle3", 2)
    assert ref.per_position == (0.730, 0.521) and ref.source == "published"
    assert "test_acceptance_length" in ref.citation
    dflash = R.published_for("dflash", 8)   # published as AL 2.93 with the bonus token, k=8
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
    assert R.choose(None, u, R.published_for("eagle3", 1)) is u
    assert R.choose(o, u) is o
    assert R.choose() is None
    assert R.self_reference(counts([0.8]), 4).per_position == (0.8,)


def test_a_published_figure_is_used_only_at_the_k_of_the_server():
    """Never an 8-deep MTP figure for a server of unknown depth: no k, no published figure,
    and the reason says what to give."""
    assert R.published_for("mtp", None) is None
    assert "k is unknown" in R.why_no_published("mtp", None)
    three = R.published_for("mtp", 3)
    assert three.per_position == (0.76, 0.62, 0.51) and three.k == 3
    assert "first 3 of 8 positions" in three.name and "at k=3" in three.words()
    # a server deeper than the figure: the figure keeps the positions it states
    assert R.published_for("mtp", 10).k == 8
    # a figure published as a mean holds for its own k only, and has no stated shape
    # DFlash's AL 2.93 was measured at k=8 (the PR's serve command): not a figure for k=3
    assert R.published_for("dflash", 3) is None
    assert "mean for k=8 only; this server has k=3" in R.why_no_published("dflash", 3)
    assert R.published_for("dflash", 8).shape_stated is False
    assert R.published_for("eagle3", 3).shape_stated is True
    assert R.why_no_published(None, 3) == "the method is unknown"
    assert R.why_no_published("eagle3", 3) is None


def test_a_users_mean_only_reference_has_no_stated_shape(tmp_path):
    f = tmp_path / "ref.json"
    f.write_text(json.dumps({"mean_acceptance_length": 2.6, "bonus_counted": True, "k": 3}))
    ref = R.load_user_reference(f)
    assert ref.source == "user" and ref.shape_stated is False and ref.tolerance == 0.10
