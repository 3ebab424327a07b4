"""vLLM log windows: draft-count recovery, formats, and the real lab logs."""

import random
from pathlib import Path

import pytest

from specdoctor.sources.vllm_log import parse_log, recover_counts

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"


def vllm_v1_line(drafts: int, per_pos: list[int], drafted: int) -> str:
    """A payload formatted exactly as vllm/v1/spec_decode/metrics.py formats it."""
    accepted = sum(per_pos)
    rates = ", ".join(f"{a / drafts:.3f}" for a in per_pos)
    return ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
            "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
            "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
            % (1 + accepted / drafts, 1.0, 2.0, accepted, drafted, rates,
               accepted / drafted * 100))


def _parse(lines, drafter="auto"):
    return parse_log(lines, "t.log", drafter)


def test_recovery_on_the_documented_example():
    # ENGINES.md's example line: 21 accepted of 57 drafted, rates .667 .238 .095, AL 2.00.
    rec = recover_counts(21, 57, "2.00", ["0.667", "0.238", "0.095"], fixed_length=False)
    assert rec.drafts == 21 and rec.per_position == (14, 5, 2)


@pytest.mark.parametrize("seed", range(200))
def test_recovery_reproduces_random_windows_exactly(seed):
    rng = random.Random(seed)
    k = rng.randint(1, 8)
    drafts = rng.randint(1, 400)
    per_pos, prev = [], drafts
    for _ in range(k):
        prev = rng.randint(0, prev)
        per_pos.append(prev)
    if sum(per_pos) == 0:
        per_pos[0] = 1
    drafted = drafts * k  # fixed-length drafter
    line = vllm_v1_line(drafts, per_pos, drafted)
    w = _parse([line], "fixed").windows[0].profile
    assert w.drafts == drafts
    assert list(w.accepted_per_position) == per_pos
    w2 = _parse([line], "variable").windows[0].profile  # without the k*D shortcut
    assert w2.drafts in (drafts, None)
    if w2.drafts is not None:
        assert sum(w2.accepted_per_position) == sum(per_pos)


def test_nothing_accepted_counts_drafts_only_for_fixed_length():
    line = vllm_v1_line(10, [0, 0, 0], 30)
    assert _parse([line], "fixed").windows[0].profile.drafts == 10
    unknown = _parse([line], "variable").windows[0].profile
    assert unknown.drafts is None and unknown.mean_acceptance_length is None
    assert unknown.acceptance_rate == 0.0  # still known from tokens


def test_auto_reads_the_method_from_the_startup_line():
    start = ("(EngineCore pid=1) INFO 11-29 08:28:48 [core.py:133] Initializing a V1 LLM engine "
             "(v0.32.0) with config: model='m', speculative_config=SpeculativeConfig(method='ngram', "
             "model=None, num_spec_tokens=3), tokenizer='m'")
    r = _parse([start, vllm_v1_line(10, [0, 0, 0], 27)])
    assert r.windows[0].profile.drafts is None
    assert any("ngram" in n for n in r.notes)


def test_early_v1_and_forked_formats():
    early = "INFO 05-01 10:00:00 [loggers.py:1] SpecDecoding metrics: Draft acceptance rate: 36.8%, Accepted: 21 tokens, Drafted: 57 tokens"
    fork = vllm_v1_line(21, [14, 5, 2], 57).replace("Drafted: 57 tokens,", "Drafted: 57 tokens, Rejected: 36 tokens, Reverify: 0,")
    r = _parse([early, fork], "variable")
    assert [w.profile.accepted_tokens for w in r.windows] == [21, 21]
    assert r.windows[0].profile.drafts is None and r.windows[0].timestamp == "05-01 10:00:00"
    assert r.windows[1].profile.accepted_per_position == (14, 5, 2)


def test_v0_running_totals_become_differences_and_restarts_are_noted():
    def v0(acc, drafted, emitted):
        return (f"INFO 01-01 00:00:00 metrics.py:1] Speculative metrics: Draft acceptance rate: 0.5, "
                f"System efficiency: 0.4, Number of speculative tokens: 3, Number of accepted tokens: {acc}, "
                f"Number of draft tokens: {drafted}, Number of emitted tokens: {emitted}.")
    r = _parse([v0(30, 60, 45), v0(45, 90, 65), v0(6, 12, 8)])
    assert r.cumulative
    assert [w.profile.drafts for w in r.windows] == [20, 10, 4]
    # accepted prefixes: emitted - drafts (V0's "accepted" also counts tokens past a rejection)
    assert [w.profile.accepted_tokens for w in r.windows] == [25, 10, 4]
    assert [w.printed["accepted"] for w in r.windows] == ["30", "45", "6"]
    assert any("restarted" in n for n in r.notes)


def test_v0_accepted_prefix_and_tokens_per_step_come_from_the_emitted_count():
    """issue 9539's line (vLLM 0.6.3, k=3): 13311 draft tokens are 4437 drafts; 10616 emitted
    tokens are 2.39 tokens per step, as its system efficiency 0.598 = 10616 / (4437 x 4) says.
    V0's "accepted" 8547 would read 2.93."""
    log = FIXTURES / "threads" / "issue9539_v0_period.log"
    w = parse_log(log.read_text().splitlines(), "t.log").windows[0].profile
    assert (w.drafts, w.draft_tokens, w.accepted_tokens, w.k) == (4437, 13311, 10616 - 4437, 3)
    assert round(w.mean_acceptance_length, 2) == 2.39
    assert round(10616 / (4437 * 4), 3) == 0.598      # the line's own system efficiency
    # issue 7301 (k=5): 15 draft tokens are 3 drafts that emitted 3 tokens: nothing accepted,
    # although V0 printed 1 accepted (a token after a rejection)
    log = FIXTURES / "threads" / "issue7301_v0_cumulative.log"
    ws = [x.profile for x in parse_log(log.read_text().splitlines(), "t.log").windows]
    assert [(p.drafts, p.accepted_tokens) for p in ws] == [(1, 0), (2, 0)]


def test_v0_lines_that_cannot_be_one_servers_counts_are_skipped():
    def v0(k, acc, drafted, emitted):
        return (f"Speculative metrics: Draft acceptance rate: 0.5, System efficiency: 0.4, "
                f"Number of speculative tokens: {k}, Number of accepted tokens: {acc}, "
                f"Number of draft tokens: {drafted}, Number of emitted tokens: {emitted}.")
    # more emitted past one token a step than accepted; draft tokens not a multiple of k
    r = _parse([v0(3, 5, 30, 20), v0(3, 5, 31, 12)])
    assert r.windows == [] and r.skipped.count == 2
    # k changes: a restart with another k, counted from zero
    r = _parse([v0(3, 6, 30, 15), v0(5, 2, 10, 3)])
    assert [(w.profile.k, w.profile.drafts, w.profile.accepted_tokens) for w in r.windows] == [
        (3, 10, 5), (5, 2, 1)]
    assert any("k changed from 3 to 5" in n for n in r.notes)


@pytest.mark.parametrize("sep", [", ", ",", ",  "])
def test_per_position_lists_are_read_whole_with_or_without_spaces(sep):
    line = vllm_v1_line(21, [14, 5, 2], 57).replace("0.667, 0.238, 0.095",
                                                    sep.join(["0.667", "0.238", "0.095"]))
    assert f"0.667{sep}0.238{sep}0.095, Avg" in line
    w = _parse([line], "variable").windows[0].profile
    assert (w.drafts, w.k, w.accepted_per_position) == (21, 3, (14, 5, 2))
    assert _parse([line.replace("Avg Draft", "Extra: 1, Avg Draft")], "variable"
                  ).windows[0].profile.k == 3   # a fork's field after the list


@pytest.mark.parametrize("bad", ["0.667,0.238;0.095", "0.667, 0.238, 0.09x", "0.667,0.238 0.095"])
def test_a_per_position_list_not_read_to_its_end_is_skipped_not_cut_short(bad):
    line = vllm_v1_line(21, [14, 5, 2], 57).replace("0.667, 0.238, 0.095", bad)
    r = _parse([line], "variable")
    assert r.windows == [] and r.skipped.count == 1
    assert "per-position list not read to its end" in r.skipped.examples[0]


def test_malformed_lines_are_counted_with_their_line_numbers():
    lines = ["SpecDecoding metrics: Mean acceptance length: 2.0", "noise",
             vllm_v1_line(5, [3, 1], 10), "SpecDecoding metrics: garbage"]
    r = _parse(lines)
    assert len(r.windows) == 1
    assert r.skipped.count == 2
    assert r.skipped.examples[0].startswith("t.log:1:") and r.skipped.examples[1].startswith("t.log:4:")


def test_zero_draft_window_is_kept_with_zero_counts():
    line = ("SpecDecoding metrics: Mean acceptance length: nan, Accepted throughput: 0.00 tokens/s, "
            "Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, "
            "Per-position acceptance rate: nan, nan, Avg Draft acceptance rate: nan%")
    w = _parse([line]).windows[0].profile
    assert (w.drafts, w.draft_tokens, w.accepted_tokens) == (0, 0, 0)
    assert w.mean_acceptance_length is None


def test_grep_and_python_scans_agree_on_a_real_log(tmp_path):
    from specdoctor.sources import scan, vllm_log

    log = FIXTURES / "lab-ngram-k3" / "server.log"
    text = log.read_bytes()
    f = tmp_path / "no-final-newline.log"
    f.write_bytes(text.rstrip(b"\n"))
    markers = tuple(m.encode() for m in vllm_log.MARKERS)
    for path in (log, f):
        via_grep = list(scan.iter_marked_lines(str(path), markers))
        via_python = list(scan._python_scan(str(path), markers, 4096))
        assert via_grep == via_python
        assert sum("SpecDecoding metrics:" in line for _, line in via_grep) == text.count(b"SpecDecoding metrics:")


def test_totals_of_a_generated_log_equal_the_counts_it_printed(tmp_path):
    """Windows formatted as vLLM formats them, every one distinct; the generator adds up what
    it printed, independently of the reader (fixed-length drafts, so every count is exact)."""
    import random

    from specdoctor.sources.logs import read_logs
    from tests.sources.vllm_lines import STARTUP

    rng = random.Random(3)
    lines, want = [STARTUP.format(m="eagle")], [0, 0, 0, [0, 0, 0]]
    for i in range(300):
        drafts = rng.randint(1, 5000)
        pos, prev = [], drafts
        for _ in range(3):
            prev = rng.randint(prev // 2, prev)
            pos.append(prev)
        acc = sum(pos)
        lines += [f"INFO noise {i}", vllm_v1_line(drafts, pos, 3 * drafts)]
        want[0] += drafts
        want[1] += 3 * drafts
        want[2] += acc
        want[3] = [a + b for a, b in zip(want[3], pos)]
    log = tmp_path / "gen.log"
    log.write_text("\n".join(lines) + "\n")
    t = read_logs([log]).total
    assert [t.drafts, t.draft_tokens, t.accepted_tokens] == want[:3]
    # per-position counts of windows above 1000 drafts are rounded from 3-decimal rates
    assert sum(t.accepted_per_position) == want[2]
    assert all(abs(a - b) <= 0.0005 * want[0] for a, b in zip(t.accepted_per_position, want[3]))
