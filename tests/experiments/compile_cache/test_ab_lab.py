"""Compile-cache A/B on a real lab server (two boots: the cache as found, then an isolated
root): on a clean cache the verdict is "no effect", the isolated arm really compiled into its
own root, and the user's cache lost nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.experiments.compile_cache import ab, scan
from specdoctor.lab import lab as labmod
from specdoctor.launch import free_port

pytestmark = pytest.mark.lab


def test_clean_cache_ab_is_no_effect(tmp_path, inductor):
    spec = labmod.lab_spec("draft_model", 4, free_port())
    root = Path(spec.env["VLLM_CACHE_ROOT"]) if "VLLM_CACHE_ROOT" in spec.env else (
        scan.default_root())
    before = {p for p in root.rglob("*")} if root.exists() else set()
    res = ab.ab(spec, ab.protocol_measure(4, 24), workdir=tmp_path, timeout_s=1200,
                keep_isolated=False)
    assert res.found.error is None and res.isolated.error is None, res.to_json()
    assert res.verdict == "no effect", res.evidence
    # the copy drafter accepts everything, greedy, in both arms
    for arm in (res.found, res.isolated):
        assert arm.profile.per_position == [1.0, 1.0, 1.0, 1.0]
    iso = res.isolated.env_changes["VLLM_CACHE_ROOT"]
    saved = [c for c in res.isolated.cache_lines if c["action"] == "saved"]
    assert saved and all(c["path"].startswith(iso) for c in saved)
    assert not any(c["path"].startswith(iso) for c in res.found.cache_lines)
    assert before <= {p for p in root.rglob("*")}  # nothing of the user's cache removed
