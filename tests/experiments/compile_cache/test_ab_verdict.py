"""The A/B verdict rule on profiles, and an arm that cannot start (no vLLM needed)."""

from __future__ import annotations

import sys

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.experiments.compile_cache import ab
from specdoctor.launch import LaunchSpec, free_port


def _p(drafts: int, per_pos: tuple[int, ...], k: int = 3) -> AcceptanceProfile:
    return AcceptanceProfile(drafts=drafts, draft_tokens=drafts * k, accepted_tokens=sum(per_pos),
                             accepted_per_position=per_pos)


def test_identical_arms_are_no_effect():
    v, ev = ab.decide(_p(100, (60, 30, 10)), _p(100, (60, 30, 10)))
    assert v == "no effect" and "identical counts in both arms" in ev


def test_case_a_recovery():
    # Case A: acceptance length 0.75 (cliff) → 2.26 after a clean cache
    v, ev = ab.decide(_p(200, (100, 50, 0)), _p(200, (170, 150, 132)))
    assert v == "recovered", ev


def test_small_noise_is_no_effect_and_worse_is_inconclusive():
    assert ab.decide(_p(200, (120, 60, 30)), _p(200, (122, 60, 31)))[0] == "no effect"
    assert ab.decide(_p(200, (170, 150, 132)), _p(200, (100, 50, 0)))[0] == "inconclusive"
    assert ab.decide(None, _p(10, (1, 0, 0)))[0] == "inconclusive"


def test_an_arm_that_cannot_start_is_inconclusive_with_its_log_tail(tmp_path):
    argv = (sys.executable, "-c", "import sys; print('engine boom: bad flag'); sys.exit(3)")
    spec = LaunchSpec(argv, {}, free_port(), label="t")
    calls = []
    res = ab.ab(spec, lambda url: calls.append(url), workdir=tmp_path, timeout_s=30)
    assert res.verdict == "inconclusive" and not calls
    assert "engine boom: bad flag" in res.found.log_tail
    assert "engine boom: bad flag" in res.isolated.log_tail
    assert res.isolated.env_changes["VLLM_CACHE_ROOT"].startswith(str(tmp_path))
    assert set(res.isolated.env_changes) == set(ab.CACHE_ENV)
    assert not (tmp_path / "isolated-cache").exists()
