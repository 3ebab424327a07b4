"""Prometheus parsing and run deltas, on dumps recorded from real lab servers."""

from pathlib import Path

import pytest

from specdoctor.errors import InputError, TargetError
from specdoctor.sources import prometheus

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
DM = ROOT / "lab-draft_model-k4"


def read(path: Path) -> prometheus.CounterReading:
    return prometheus.parse_text(path.read_text())


def test_parses_counters_and_skips_created():
    r = read(DM / "metrics_3_final.txt")
    assert r.model_names == ("lab",)
    assert r.profile.k == 4
    assert r.profile.accepted_per_position == (r.profile.drafts,) * 4
    assert len(r.created) == 3 + 4  # three counters and four positions


def test_restart_seen_through_created_timestamps():
    # Two different server lives: the second's counters were re-created.
    other = sorted(p for p in ROOT.glob("lab-*") if p != DM)
    if not other:
        pytest.skip("needs a second recording")
    d = prometheus.delta(read(DM / "metrics_3_final.txt"), read(other[0] / "metrics_0_start.txt"))
    assert d.restarted and "re-created" in d.reason
    with pytest.raises(TargetError, match="restarted"):
        prometheus.require_no_restart(d)


def test_counter_going_down_is_a_restart_not_a_negative():
    before = read(DM / "metrics_3_final.txt")
    after = read(DM / "metrics_0_start.txt")
    after_no_created = prometheus.CounterReading(after.profile, {}, after.model_names)
    d = prometheus.delta(before, after_no_created)
    assert d.restarted and "went down" in d.reason
    assert d.profile.drafts >= 0


def test_speculation_off_and_garbage_are_clear_errors():
    text = (DM / "metrics_3_final.txt").read_text()
    no_spec = "\n".join(l for l in text.splitlines() if "spec_decode" not in l) + "\n"
    with pytest.raises(InputError, match="no vllm:spec_decode"):
        prometheus.parse_text(no_spec)
    with pytest.raises(InputError):
        prometheus.parse_text("this is {{ not prometheus\n")
