"""A server log is kept bounded for the experiments that read its text: its start-up lines and
its last lines, on a log recorded from a real lab server (tests/fixtures/vllm/lab-draft_model-k4,
RECORDED.md says how)."""

from __future__ import annotations

from pathlib import Path

from specdoctor.experiments import common

LOG = Path(__file__).parents[1] / "fixtures" / "vllm" / "lab-draft_model-k4" / "server.log"


def test_a_log_within_the_bound_is_read_whole():
    assert common.read_text(LOG) == LOG.read_text(errors="replace")


def test_a_larger_log_keeps_its_first_and_last_lines_and_says_what_it_left_out(tmp_path):
    text = LOG.read_text()
    big = tmp_path / "server.log"
    big.write_text(text * 20)   # the same server's log, as if it had run twenty times longer
    head, tail = 4096, 8192
    kept = common.read_text(big, head, tail)
    lines = kept.splitlines()
    assert len(kept.encode()) <= head + tail + 200
    assert lines[0] == text.splitlines()[0]                       # the start-up lines
    assert lines[-1] == text.splitlines()[-1]                     # the last line logged
    left = big.stat().st_size - head - tail
    assert any(f"{left:,} bytes of this log left out" in ln for ln in lines)
    # whole lines only, on both sides of the cut
    cut = next(i for i, ln in enumerate(lines) if "left out" in ln)
    assert all(ln in text.splitlines() for ln in lines[:cut] + lines[cut + 1:])


def test_a_missing_log_is_empty(tmp_path):
    assert common.read_text(tmp_path / "none.log") == ""
