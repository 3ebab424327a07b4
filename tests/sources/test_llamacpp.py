"""llama.cpp server sources on real captured output (tests/sources/fixtures/llamacpp).

/metrics inputs are constructed (no captured llama-server metrics text with speculative counters
was found in the threads searched); each says so where it is built.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.acceptance.profile import sum_profiles
from specdoctor.errors import InputError
from specdoctor.sources import llamacpp, sglang

FIXTURES = Path(__file__).parent / "fixtures" / "llamacpp"


def read(name: str):
    with open(FIXTURES / name, encoding="utf-8") as fh:
        return llamacpp.parse_log(fh, name)


def fixture_line(name: str, lineno: int) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()[lineno - 1]


def load_json(name: str) -> dict:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return json.loads("\n".join(l for l in text.splitlines() if not l.startswith("#")))


# -- log lines ----------------------------------------------------------------------------------


def test_per_position_line_recovers_exact_counts():
    r = read("pr24536_eagle3_per_position.log")
    assert len(r.windows) == 1 and r.skipped.count == 0
    w = r.windows[0]
    assert (w.line, w.timestamp, w.printed["slot"], w.printed["task"]) == (9, "0.06.896.015", 1, 0)
    p = w.profile
    assert (p.accepted_tokens, p.draft_tokens) == (167, 259)
    # 87 is the only step count that prints mean 2.92 and rates 0.805/0.632/0.483
    assert p.drafts == 87
    assert p.accepted_per_position == (70, 55, 42)
    assert p.k == 3
    assert p.mean_acceptance_length == pytest.approx(1 + 167 / 87)
    assert p.acceptance_rate == pytest.approx(167 / 259)
    assert p.per_position == pytest.approx([70 / 87, 55 / 87, 42 / 87])


def test_statistics_line_agrees_with_the_request_line():
    lines = (FIXTURES / "pr24536_eagle3_per_position.log").read_text(encoding="utf-8").splitlines()
    totals = llamacpp.statistics_totals(lines)
    s = totals["draft-eagle3"]
    assert (s.drafts, s.draft_tokens, s.accepted_tokens) == (87, 259, 167)
    assert s.accepted_per_position == (70, 55, 42)   # position 0 = "#acc drafts = 70"
    w = read("pr24536_eagle3_per_position.log").windows[0].profile
    assert (w.drafts, w.accepted_per_position) == (s.drafts, s.accepted_per_position)


def test_current_mean_len_format():
    r = read("pr27342_dflash2_mean_len.log")
    assert len(r.windows) == 1
    w = r.windows[0]
    assert (w.line, w.printed["task"], w.printed["mean_len"]) == (7, 4827, "4.94")
    assert (w.profile.accepted_tokens, w.profile.draft_tokens) == (886, 900)
    assert w.profile.drafts == 225               # the only integer that prints 4.94
    assert w.profile.accepted_per_position is None and w.profile.k is None


def test_older_rate_only_format_and_cumulative_statistics():
    r = read("pr23269_mtp_statistics.log")
    assert len(r.windows) == 1
    w = r.windows[0]
    assert (w.line, w.timestamp) == (11, None)
    assert (w.profile.accepted_tokens, w.profile.draft_tokens, w.profile.drafts) == (118, 144, None)
    assert w.profile.acceptance_rate == pytest.approx(118 / 144)
    assert w.profile.mean_acceptance_length is None  # never guessed
    lines = (FIXTURES / "pr23269_mtp_statistics.log").read_text(encoding="utf-8").splitlines()
    totals = llamacpp.statistics_totals(lines)
    assert set(totals) == {"ngram-map-k", "ngram-mod", "draft-mtp"}
    mtp = totals["draft-mtp"]
    assert (mtp.drafts, mtp.draft_tokens, mtp.accepted_tokens) == (727, 1447, 1135)
    assert "632" in mtp.notes[0]
    assert totals["ngram-map-k"].drafts == 0
    assert any("draft-mtp" in n and "cumulative" in n for n in r.notes)


def test_trace_per_position_line_attaches_to_its_request():
    # Input: the real pr24536 line with its in-review field names edited to the current ones,
    # followed by the trace-level line built from server-context.cpp's format string
    # ("     acc per pos = (%s)"); no captured trace line was found.
    real = fixture_line("pr24536_eagle3_per_position.log", 9)
    current = real.split(", mean acceptance length")[0] + ", mean len =  2.92"
    trace = "0.06.896.016 T slot print_timing: id  1 | task 0 |      acc per pos = (0.805, 0.632, 0.483)"
    r = llamacpp.parse_log([current, trace], "edited.log")
    assert r.skipped.count == 0
    p = r.windows[0].profile
    assert (p.drafts, p.accepted_per_position) == (87, (70, 55, 42))


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("(  886 accepted", "(  986 accepted", "accepted of only"),
        ("(  886 accepted /   900 generated), mean len =  4.94", "(  886 acc", "without (N accepted"),
    ],
)
def test_malformed_line_is_counted_not_fatal(old, new, reason):
    # Input: the real pr27342 line (fixture line 7) with one field edited.
    real = fixture_line("pr27342_dflash2_mean_len.log", 7)
    edited = real.replace(old, new)
    assert edited != real
    r = llamacpp.parse_log([real, edited], "edited.log")
    assert [w.line for w in r.windows] == [1]
    assert r.skipped.count == 1 and reason in r.skipped.examples[0]


def test_orphan_trace_line_is_counted():
    trace = "0.06.896.016 T slot print_timing: id  3 | task 9 |      acc per pos = (0.805, 0.632)"
    r = llamacpp.parse_log([trace], "x.log")
    assert r.windows == [] and r.skipped.count == 1


def test_counts_are_not_recovered_when_several_fit_but_bounded():
    # 5995 accepted / 9089 generated, mean len 4.30 (printed by llama-server in
    # lemonade-sdk/llamacpp-rocm#129): every step count from 1814 to 1819 prints 4.30.
    fits = [d for d in range(1, 9090) if f"{1 + 5995 / d:.2f}" == "4.30"]
    assert fits == list(range(1814, 1820))
    rec = llamacpp.recover_counts(5995, 9089, "4.30", None)
    assert (rec.drafts, rec.per_position, rec.drafts_range) == (None, None, (1814, 1819))
    assert llamacpp.recover_counts(886, 900, "4.94", None) == llamacpp.Recovered(225, None)


def test_windows_add_counts_and_unknown_drafts_stay_unknown():
    a = read("pr24536_eagle3_per_position.log").windows[0].profile
    b = read("pr27342_dflash2_mean_len.log").windows[0].profile
    c = read("pr23269_mtp_statistics.log").windows[0].profile
    ab = sum_profiles([a, b])
    assert (ab.drafts, ab.accepted_tokens, ab.draft_tokens) == (87 + 225, 167 + 886, 259 + 900)
    assert ab.count_weighted is True
    assert ab.mean_acceptance_length == pytest.approx(1 + (167 + 886) / (87 + 225))
    abc = sum_profiles([a, b, c])
    assert abc.drafts is None and abc.mean_acceptance_length is None
    assert abc.acceptance_rate == pytest.approx((167 + 886 + 118) / (259 + 900 + 144))


def test_detection_between_engines():
    llama_line = fixture_line("pr27342_dflash2_mean_len.log", 7)
    stats_line = fixture_line("pr23269_mtp_statistics.log", 14)
    old_line = fixture_line("pr23269_mtp_statistics.log", 11)
    timing_line = fixture_line("pr27342_dflash2_mean_len.log", 5)
    assert llamacpp.looks_like(llama_line) and llamacpp.looks_like(stats_line)
    assert llamacpp.looks_like(old_line)
    assert not llamacpp.looks_like(timing_line)
    assert not sglang.looks_like(llama_line)
    sglang_line = (Path(__file__).parent / "fixtures" / "sglang" / "pr6081_mtp_dp_attention.log"
                   ).read_text(encoding="utf-8").splitlines()[4]
    assert sglang.looks_like(sglang_line) and not llamacpp.looks_like(sglang_line)


# -- response timings ---------------------------------------------------------------------------


def test_timings_from_a_response():
    timings = load_json("pr12603_timings.json")
    p = llamacpp.profile_from_timings(timings)
    assert (p.draft_tokens, p.accepted_tokens, p.drafts) == (347, 65, None)
    assert p.acceptance_rate == pytest.approx(65 / 347)
    assert p.mean_acceptance_length is None
    assert llamacpp.profile_from_timings({"timings": timings}) == p


def test_timings_errors_name_the_fix():
    timings = load_json("pr12603_timings.json")
    without = {k: v for k, v in timings.items() if not k.startswith("draft_")}
    with pytest.raises(InputError, match="draft model"):
        llamacpp.profile_from_timings({"timings": without})
    with pytest.raises(InputError, match="accepted of only"):
        llamacpp.profile_from_timings(dict(timings, draft_n_accepted=400))


# -- /metrics (constructed: names from ggml-org/llama.cpp#26389 and scripts that scrape it) ------

METRICS_TOTAL = """\
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 1200
# HELP llamacpp:spec_decode_num_drafts_total Total drafts
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 87
# HELP llamacpp:spec_decode_num_draft_tokens_total Total draft tokens
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 259
# HELP llamacpp:spec_decode_num_accepted_tokens_total Total accepted draft tokens
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 167
# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted draft tokens per position
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 70
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 55
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 42
"""


def test_prometheus_counters():
    p = llamacpp.profile_from_prometheus(METRICS_TOTAL)
    assert (p.drafts, p.draft_tokens, p.accepted_tokens) == (87, 259, 167)
    assert p.accepted_per_position == (70, 55, 42) and p.k == 3
    assert p.count_weighted is True
    assert any("cumulative" in n for n in p.notes)
    # the names as PR #26389 lists them, without the _total suffix, read the same
    plain = METRICS_TOTAL.replace("_total", "")
    assert llamacpp.profile_from_prometheus(plain) == p


def test_prometheus_without_spec_counters_names_the_fix():
    head = "\n".join(METRICS_TOTAL.splitlines()[:3]) + "\n"
    with pytest.raises(InputError, match="--metrics"):
        llamacpp.profile_from_prometheus(head)
