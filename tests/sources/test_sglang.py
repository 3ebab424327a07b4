"""SGLang sources on real captured output (tests/sources/fixtures/sglang, each file names its thread).

Inputs for /server_info and /metrics are constructed (no captured sample with speculative
figures was found in the sglang threads searched); each says so where it is built.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.acceptance.profile import difference, sum_profiles
from specdoctor.errors import InputError
from specdoctor.sources import sglang

FIXTURES = Path(__file__).parent / "fixtures" / "sglang"


def read(name: str, **kw):
    with open(FIXTURES / name, encoding="utf-8") as fh:
        return sglang.parse_log(fh, name, **kw)


def fixture_line(name: str, lineno: int) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()[lineno - 1]


# -- log lines ----------------------------------------------------------------------------------


def test_dp_attention_lines_without_accept_rate():
    r = read("pr6081_mtp_dp_attention.log")
    assert [w.line for w in r.windows] == [5, 6, 7, 8, 9]
    assert [w.printed["ranks"] for w in r.windows] == ["DP0 TP0", "DP6 TP6", "DP5 TP5", "DP7 TP7", "DP2 TP2"]
    assert [w.timestamp for w in r.windows][:2] == ["2025-05-31 18:31:21"] * 2
    assert [w.profile.reported_mean_acceptance_length for w in r.windows] == [2.90, 2.86, 2.94, 2.65, 2.58]
    first = r.windows[0].profile
    assert (first.drafts, first.draft_tokens, first.accepted_tokens) == (None, None, None)
    assert first.count_weighted is False
    assert first.mean_acceptance_length == pytest.approx(2.90)  # bonus token counted
    assert first.accepted_per_draft == pytest.approx(1.90)      # bonus token not counted
    assert first.acceptance_rate is None                        # no k: not derived
    assert "accept rate" not in r.windows[0].printed
    assert r.windows[0].printed["#token"] == "37217"
    assert r.windows[0].printed["gen throughput (token/s)"] == "171.01"
    assert r.skipped.count == 0


def test_aggregate_of_rate_only_windows_is_flagged_not_weighted():
    r = read("pr6081_mtp_dp_attention.log")
    total = sum_profiles([w.profile for w in r.windows])
    assert total.count_weighted is False
    assert total.drafts is None
    assert total.mean_acceptance_length == pytest.approx((2.90 + 2.86 + 2.94 + 2.65 + 2.58) / 5)
    assert any("unweighted" in n for n in total.notes)
    assert sglang.RATE_ONLY_NOTE in r.notes


def test_accept_rate_line_with_k_from_the_launch_command():
    # The thread states --speculative-num-steps 3 --speculative-eagle-topk 1
    # --speculative-num-draft-tokens 4.
    args = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    k, note = sglang.k_from_server_args(args)
    assert (k, note) == (3, None)
    r = read("pr21723_nextn_accept_rate.log", k=k)
    assert len(r.windows) == 1
    w = r.windows[0]
    assert (w.line, w.timestamp, w.printed["ranks"]) == (5, "2026-03-18 11:22:05.874", "TP0")
    assert w.printed["#full token"] == "5046" and w.printed["mamba usage"] == "0.08"
    assert w.printed["accept rate"] == "0.66"
    assert w.profile.k == 3
    assert w.profile.mean_acceptance_length == pytest.approx(2.64)
    # chain drafting proposes k tokens per step: accepted / proposed = (2.64 - 1) / 3
    assert w.profile.acceptance_rate == pytest.approx(1.64 / 3)
    # 0.66 = 2.64 / 4: this build's rate counted the bonus token and the root
    assert w.printed["accept rate definition"].startswith("accept len / num_draft_tokens")


def test_log_without_speculation():
    r = read("pr22166_no_speculation.log")
    assert r.windows == [] and r.skipped.count == 0
    assert any("without accept len" in n for n in r.notes)
    assert sglang.looks_like(fixture_line("pr22166_no_speculation.log", 4))       # Decode batch
    assert not sglang.looks_like(fixture_line("pr22166_no_speculation.log", 6))   # Prefill batch


def test_trailing_comma_and_unknown_rate_definition():
    r = read("fastrl_pr4_trailing_comma.log")
    assert [w.line for w in r.windows] == [5, 6, 7]
    assert [w.printed["cuda graph"] for w in r.windows] == ["False", "False", "True"]
    assert all(w.printed["#queue-req"] == "0" for w in r.windows)
    assert all(w.profile.mean_acceptance_length == pytest.approx(1.0) for w in r.windows)
    assert r.windows[0].printed["accept rate"] == "0.11"
    # 1.00 / 9 = 0.11: the bonus-counting definition with 9 draft tokens (k = 8) ...
    assert sglang.classify_accept_rate(1.00, 0.11, 8).startswith("accept len / num_draft_tokens")
    # ... and the current definition fits a printed 0.00 only
    assert sglang.classify_accept_rate(1.00, 0.00, 8) == "accepted drafts / proposed drafts"


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("accept len: 2.90", "accept len: n/a", "not a number"),
        ("accept len: 2.90", "accept len: 0.00", "below 1"),
        ("accept len: 2.90, ", "accept rate: 0.61, ", "accept rate without accept len"),
    ],
)
def test_malformed_line_is_counted_not_fatal(old, new, reason):
    # Input: a real line (pr6081 fixture, line 5) with one field edited.
    real = fixture_line("pr6081_mtp_dp_attention.log", 5)
    edited = real.replace(old, new)
    assert edited != real
    r = sglang.parse_log([real, edited, real], "edited.log")
    assert [w.line for w in r.windows] == [1, 3]
    assert r.skipped.count == 1
    assert r.skipped.examples[0].startswith("edited.log:2:") and reason in r.skipped.examples[0]


def test_k_read_from_a_logged_server_args_line():
    # Constructed: no captured ServerArgs line with speculative fields was found; the field names
    # are SGLang's ServerArgs fields. The Decode batch line is the real pr21723 one.
    args_line = ("[2026-03-18 11:20:00] server_args=ServerArgs(model_path='m', "
                 "speculative_algorithm='NEXTN', speculative_num_steps=3, "
                 "speculative_eagle_topk=1, speculative_num_draft_tokens=4, tp_size=1)")
    decode = fixture_line("pr21723_nextn_accept_rate.log", 5)
    r = sglang.parse_log([args_line, decode], "x.log")
    assert r.windows[0].profile.k == 3
    assert r.windows[0].profile.acceptance_rate == pytest.approx(1.64 / 3)


# -- k normalisation ----------------------------------------------------------------------------


def test_chain_k_counts_the_root():
    assert sglang.chain_k(2) == 1
    assert sglang.chain_k(4) == 3
    with pytest.raises(ValueError):
        sglang.chain_k(1)


def test_k_from_server_args_cases():
    # SpecForge#310's launch: steps 4, topk 1, num-draft-tokens 24 → SGLang runs 5 (steps + 1)
    k, note = sglang.k_from_server_args({"speculative_algorithm": "EAGLE3", "speculative_num_steps": 4,
                                         "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 24})
    assert k == 4 and "overridden" in (note or "")
    k, note = sglang.k_from_server_args({"speculative_algorithm": "EAGLE", "speculative_num_steps": 5,
                                         "speculative_eagle_topk": 8, "speculative_num_draft_tokens": 64})
    assert k is None and "tree" in (note or "")
    assert sglang.k_from_server_args({"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1,
                                      "speculative_num_draft_tokens": 4}) == (3, None)
    assert sglang.k_from_server_args({"speculative_algorithm": "NGRAM", "speculative_eagle_topk": 1,
                                      "speculative_num_draft_tokens": 8})[0] is None
    assert sglang.k_from_server_args({"speculative_algorithm": None})[0] is None


# -- /server_info (constructed: field names from SGLang's get_internal_state and its test) ------

ARGS = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def test_server_info_counters_are_summed_over_ranks():
    info = dict(ARGS, internal_states=[
        {"avg_spec_accept_length": 3.0, "spec_cumulative_num_accept_tokens": 123,
         "spec_cumulative_num_forward_ct": 45, "spec_counter_dp_rank": 0},
        {"avg_spec_accept_length": 2.5, "spec_cumulative_num_accept_tokens": 60,
         "spec_cumulative_num_forward_ct": 20, "spec_counter_dp_rank": 1},
    ])
    p = sglang.profile_from_server_info(info)
    assert p.count_weighted is True
    assert p.drafts == 65                       # forwards, one per request and step
    assert p.accepted_tokens == 183 - 65        # accept tokens minus one bonus per forward
    assert p.draft_tokens == 65 * 3
    assert p.k == 3
    assert p.mean_acceptance_length == pytest.approx(183 / 65)  # not the mean of 3.0 and 2.5
    assert any("cumulative" in n for n in p.notes)


def test_server_info_run_is_a_difference_of_two_readings():
    before = sglang.profile_from_server_info(dict(ARGS, internal_states=[
        {"spec_cumulative_num_accept_tokens": 123, "spec_cumulative_num_forward_ct": 45}]))
    after = sglang.profile_from_server_info(dict(ARGS, internal_states=[
        {"spec_cumulative_num_accept_tokens": 223, "spec_cumulative_num_forward_ct": 85}]))
    run = difference(after, before)
    assert (run.drafts, run.accepted_tokens, run.draft_tokens) == (40, 60, 120)
    assert run.mean_acceptance_length == pytest.approx(2.5)


def test_server_info_average_only_is_rate_only():
    p = sglang.profile_from_server_info(dict(ARGS, internal_states=[
        {"avg_spec_accept_length": 2.5}, {"avg_spec_accept_length": 3.5}]))
    assert p.count_weighted is False and p.drafts is None
    assert p.mean_acceptance_length == pytest.approx(3.0)
    assert p.acceptance_rate == pytest.approx(((1.5 / 3) + (2.5 / 3)) / 2)
    assert any("unweighted" in n for n in p.notes)
    legacy = sglang.profile_from_server_info({"avg_spec_accept_length": 2.2})  # state at top level
    assert legacy.mean_acceptance_length == pytest.approx(2.2) and legacy.k is None


def test_server_info_without_speculation_names_the_fix():
    with pytest.raises(InputError, match="speculative"):
        sglang.profile_from_server_info({"internal_states": [{"last_gen_throughput": 10.0}]})


# -- Prometheus gauges (constructed; HELP texts copied from SGLang's metrics_collector.py) --------

NEW_HELP = """\
# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="m",tp_rank="0"} 2.8
sglang:spec_accept_length{engine_type="unified",model_name="m",tp_rank="1"} 2.7
# HELP sglang:spec_accept_rate Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{engine_type="unified",model_name="m",tp_rank="0"} 0.6
sglang:spec_accept_rate{engine_type="unified",model_name="m",tp_rank="1"} 0.5
# HELP sglang:spec_num_steps Currently active speculative_num_steps.
# TYPE sglang:spec_num_steps gauge
sglang:spec_num_steps{engine_type="unified",model_name="m",tp_rank="0"} 3.0
# HELP sglang:spec_num_draft_tokens Currently active speculative_num_draft_tokens.
# TYPE sglang:spec_num_draft_tokens gauge
sglang:spec_num_draft_tokens{engine_type="unified",model_name="m",tp_rank="0"} 4.0
"""

OLD_HELP = """\
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",model_name="m",tp_rank="0"} 2.5
sglang:spec_accept_length{dp_rank="1",model_name="m",tp_rank="4"} 3.5
# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{dp_rank="0",model_name="m",tp_rank="0"} 0.625
sglang:spec_accept_rate{dp_rank="1",model_name="m",tp_rank="4"} 0.875
"""


def test_prometheus_current_definition_reads_the_logging_rank():
    p = sglang.profile_from_prometheus(NEW_HELP)
    assert p.count_weighted is False and p.drafts is None
    assert p.mean_acceptance_length == pytest.approx(2.8)   # tp_rank 0, not 2.7
    assert p.acceptance_rate == pytest.approx(0.6)
    assert p.k == 3
    assert any("latest" in n for n in p.notes)


def test_prometheus_old_rate_definition_is_not_used_and_ranks_are_flagged():
    p = sglang.profile_from_prometheus(OLD_HELP)
    assert p.acceptance_rate is None
    assert p.mean_acceptance_length == pytest.approx(3.0)
    assert p.count_weighted is False
    assert any("unweighted" in n for n in p.notes)
    assert any("not used" in n for n in p.notes)


def test_prometheus_errors_name_the_fix():
    with pytest.raises(InputError, match="--enable-metrics"):
        sglang.profile_from_prometheus("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1.0\n")
    zero = NEW_HELP.replace("} 2.8", "} 0.0").replace("} 2.7", "} 0.0")
    with pytest.raises(InputError, match="send some requests"):
        sglang.profile_from_prometheus(zero)


def test_prometheus_rate_without_k_is_kept_and_explained():
    no_config = "\n".join(l for l in NEW_HELP.splitlines()
                          if "spec_num_steps" not in l and "spec_num_draft_tokens" not in l) + "\n"
    p = sglang.profile_from_prometheus(no_config)
    assert p.k is None
    assert p.acceptance_rate == pytest.approx(0.6)
    assert any("k unknown" in n for n in p.notes)


def test_prometheus_garbage_is_an_input_error():
    with pytest.raises(InputError, match="/metrics"):
        sglang.profile_from_prometheus("sglang:spec_accept_length{model_name=\"m\" 2.8\n")
