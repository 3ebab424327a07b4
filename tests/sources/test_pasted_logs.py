"""Logs as users paste them: excerpts copied from public vLLM and llama.cpp threads (each
fixture's header names its thread) read with the counts their lines print, and draft counts
that the lines do not pin down reported as the range of counts they allow, never a guess."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from specdoctor.sources import llamacpp, recovery
from specdoctor.sources.logs import read_logs
from tests.sources.vllm_lines import v1_line

FIX = Path(__file__).resolve().parent.parent / "fixtures"
VLLM = FIX / "vllm" / "threads"
LLAMA = FIX / "llamacpp"


def counts(p):
    return (p.drafts, p.draft_tokens, p.accepted_tokens)


def test_v0_older_wording_tokens_tokens_with_a_period():
    res = read_logs([VLLM / "issue6768_v0_tokens_tokens.log"])
    assert res.reading.cumulative and res.reading.skipped.count == 0
    assert [counts(w.profile) for w in res.reading.windows] == [
        (42272 // 16, 42272, 0), ((51056 - 42272) // 16, 51056 - 42272, 0)]
    # running totals: the total is the last line, and with nothing accepted every step
    # emitted exactly one token, so the drafts equal the emitted tokens the line prints
    assert counts(res.total) == (3191, 51056, 0)
    assert res.reading.windows[-1].printed["emitted"] == "3191"


def test_v0_line_ending_in_a_period():
    res = read_logs([VLLM / "issue9539_v0_period.log"])
    t = res.total
    # accepted prefixes: 10616 emitted - 4437 drafts; the line's 8547 (rate 0.642) also counts
    # draft tokens accepted after a rejection, which emit nothing
    assert counts(t) == (13311 // 3, 13311, 10616 - 13311 // 3) and t.k == 3
    assert f"{8547 / 13311:.3f}" == "0.642"  # the line's rate is V0's own count
    assert res.reading.windows[0].printed["accepted"] == "8547"


def test_v0_consecutive_running_totals_are_differenced():
    res = read_logs([VLLM / "issue7301_v0_cumulative.log"])
    # each step emitted one token: nothing accepted, although V0 printed 1 accepted
    assert [counts(w.profile) for w in res.reading.windows] == [(1, 5, 0), (2, 10, 0)]
    assert counts(res.total) == (3, 15, 0)  # the second line's totals, not 1 + 3 drafts


def test_early_v1_lines_are_per_interval_without_a_draft_count():
    res = read_logs([VLLM / "pr15902_v1_early.log"])
    assert not res.reading.cumulative and res.reading.skipped.count == 0
    assert [counts(w.profile) for w in res.reading.windows] == [(None, 66, 66)] * 2
    # nothing bounds k there: 1 to 66 drafts each, so 2 to 132 in all
    assert res.total.drafts is None and res.total.drafts_range == (2, 132)


def test_v1_rate_first_wording_recovers_the_draft_count():
    res = read_logs([VLLM / "pr24127_v1_rate_first_ngram.log"])
    w = res.reading.windows[0].profile
    # 59 is the only count that prints the mean as 5.44; 58 and 60 do not
    assert [f"{1 + 262 / d:.2f}" for d in (58, 59, 60)] == ["5.52", "5.44", "5.37"]
    assert counts(w) == (59, 295, 262) and w.k == 5
    assert [f"{a / 59:.3f}" for a in w.accepted_per_position] == ["0.983", "0.949", "0.915",
                                                                  "0.881", "0.712"]


# -- llama.cpp -------------------------------------------------------------------------------


def test_statistics_only_log_reads_each_drafter_and_never_its_call_counts():
    res = read_logs([LLAMA / "pr23269_statistics_only.log"])
    by_impl = {w.printed["implementation"]: counts(w.profile) for w in res.reading.windows}
    # "#calls(b,g,a) = 11 800 4" must not be read as 800 drafts of ngram-mod
    assert by_impl == {"ngram-mod": (4, 256, 47), "draft-mtp": (796, 1585, 1252)}
    assert counts(res.total) == (800, 1841, 1299)


def test_statistics_beside_per_request_lines_are_not_counted_twice():
    res = read_logs([FIX.parent / "sources" / "fixtures" / "llamacpp" / "pr23269_mtp_statistics.log"])
    assert counts(res.total)[1:] == (144, 118)  # the request line only
    assert res.window_count == 1
    assert any("statistics draft-mtp" in n and "not added" in n for n in res.reading.notes)


def test_cumulative_statistics_lines_become_differences(tmp_path):
    """The statistics lines of both excerpts of the thread, in order: each drafter's windows
    are the differences of its lines; a line that goes down is a restart."""
    first = (FIX.parent / "sources" / "fixtures" / "llamacpp" / "pr23269_mtp_statistics.log")
    lines = [ln for f in (first, LLAMA / "pr23269_statistics_only.log")
             for ln in f.read_text().splitlines() if "I statistics" in ln]
    log = tmp_path / "stats.log"
    log.write_text("\n".join(lines) + "\n")
    res = read_logs([log])
    mtp = [counts(w.profile) for w in res.reading.windows
           if w.printed["implementation"] == "draft-mtp"]
    assert mtp == [(727, 1447, 1135), (796 - 727, 1585 - 1447, 1252 - 1135)]
    assert counts(res.total) == (800, 1841, 1299)  # the last line of each drafter
    log.write_text("\n".join(lines[3:] + lines[:3]) + "\n")  # later totals first: a restart
    res = read_logs([log])
    assert any("restarted" in n for n in res.reading.notes)
    assert counts(res.total) == (796 + 4 + 727 + 3, 1585 + 256 + 1447 + 192, 1252 + 47 + 1135 + 43)


@pytest.mark.parametrize("name,runs", [("pr3006_speculative_summary.log", [(245, 231), (254, 223)]),
                                       ("pr2926_speculative_summary.log", [(132, 47)])])
def test_speculative_example_summary(name, runs):
    res = read_logs([LLAMA / name])
    assert [counts(w.profile) for w in res.reading.windows] == [(None, d, a) for d, a in runs]
    # n_draft is the longest draft allowed, never a count nor k
    assert res.total.drafts is None and res.total.k is None
    assert any("n_draft is the longest draft allowed" in n for n in res.reading.notes)
    for w, (d, a) in zip(res.reading.windows, runs):
        assert w.printed["accept"] == f"{100 * a / d:.3f}"


# -- ranges of draft counts ------------------------------------------------------------------


def _prints(d: int, accepted: int, drafted: int, mean: str, rates: list[str], k: int) -> bool:
    """Whether d drafts reproduce every printed figure (brute force over positions is not
    needed: the recovery's own position check is tested against formatting elsewhere)."""
    return (-(-drafted // k) <= d <= drafted and f"{1 + accepted / d:.2f}" == mean
            and recovery.positions_for(d, accepted, rates) is not None)


@pytest.mark.parametrize("seed", range(4))
def test_v1_ranges_hold_the_true_count_and_are_tight(seed):
    rng = random.Random(seed)
    seen = 0
    for _ in range(400):
        k = rng.randint(2, 5)
        line = v1_line(rng, k, variable=True)
        payload = line.split("SpecDecoding metrics: ")[1]
        fields = dict(f.split(": ", 1) for f in payload.split(", ") if ": " in f)
        accepted = int(fields["Accepted"].split()[0])
        drafted = int(fields["Drafted"].split()[0])
        mean = fields["Mean acceptance length"]
        rates = payload.split("Per-position acceptance rate: ")[1].split(", Avg")[0].split(", ")
        if mean == "nan":
            continue
        rec = recovery.recover_counts(accepted, drafted, mean, rates, None)
        if rec.drafts is not None or rec.drafts_range is None or accepted == 0:
            continue
        seen += 1
        lo, hi = rec.drafts_range
        assert _prints(lo, accepted, drafted, mean, rates, k)
        assert _prints(hi, accepted, drafted, mean, rates, k)
        assert not _prints(lo - 1, accepted, drafted, mean, rates, k) if lo > 1 else True
        assert not _prints(hi + 1, accepted, drafted, mean, rates, k)
    assert seen > 3


def test_nothing_accepted_gives_every_count_from_drafted_over_k_to_drafted():
    rec = recovery.recover_counts(0, 7, "1.00", ["0.000"] * 3, None)
    assert (rec.drafts, rec.drafts_range) == (None, (3, 7))
    assert recovery.recover_counts(0, 9, "1.00", ["0.000"] * 3, True).drafts == 3  # fixed length


def test_exact_when_drafted_over_k_is_the_only_count_left():
    # 3.94 is printed by every count from 1698 to 1703 drafts of 5000 accepted tokens ...
    assert [d for d in range(1600, 1800) if f"{1 + 5000 / d:.2f}" == "3.94"] == list(range(1698, 1704))
    # ... but 5109 draft tokens at k = 3 need at least 1703 drafts: only 1703 is left
    assert recovery.recover_counts(5000, 5109, "3.94", None, None, k=3).drafts == 1703
    assert recovery.recover_counts(5000, 5100, "3.94", None, None, k=3).drafts_range == (1700, 1703)


def test_a_range_totals_into_a_range_of_mean_acceptance_lengths(tmp_path):
    line = ("(APIServer pid=7) INFO 11-29 08:00:00 [metrics.py:120] SpecDecoding metrics: "
            "Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: "
            "3.50 tokens/s, Accepted: 0 tokens, Drafted: 7 tokens, Per-position acceptance rate: "
            "0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%")
    ngram = (FIX / "vllm" / "lab-ngram-k3" / "server.log").read_text()
    log = tmp_path / "ngram.log"
    log.write_text(ngram + line + "\n")
    res = read_logs([log])
    base = read_logs([FIX / "vllm" / "lab-ngram-k3" / "server.log"]).total
    t = res.total
    assert t.drafts is None and t.drafts_range == (base.drafts + 3, base.drafts + 7)
    lo, hi = t.mean_acceptance_length_range
    assert math.isclose(lo, 1 + base.accepted_tokens / (base.drafts + 7))
    assert math.isclose(hi, 1 + base.accepted_tokens / (base.drafts + 3))
    assert t.to_json()["drafts_range"] == [base.drafts + 3, base.drafts + 7]
