"""Bad input never ends in a traceback and no skipped line goes uncounted: each parser on random
bytes, truncated lines, huge lines, and negative or NaN counts."""

from __future__ import annotations

import random

import pytest

from specdoctor.errors import InputError
from specdoctor.sources import llamacpp, prometheus, sglang, vllm_log
from tests.sources.vllm_lines import v1_line

V0 = ("INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, "
      "System efficiency: 0.598, Number of speculative tokens: 3, Number of accepted tokens: 8547, "
      "Number of draft tokens: 13311, Number of emitted tokens: 10616.")
LLAMA = ("0.09.401.679 I slot print_timing: id  1 | task 90 | draft acceptance = 0.54671 (  158 "
         "accepted /   289 generated), mean acceptance length =  2.63, acceptance rate per "
         "position = (0.790, 0.543, 0.300)")
LLAMA_STATS = ("[53409] 5.05.552.787 I statistics draft-mtp: #calls(b,g,a) = 11 796 796, #gen "
               "drafts = 796, #acc drafts = 694, #gen tokens = 1585, #acc tokens = 1252, "
               "dur(b,g,a) = 0.008, 33271.024, 1.264 ms")
SGLANG = ("[2025-01-01 10:00:00 DP0 TP0] Decode batch. #running-req: 1, #token: 540, token usage: "
          "0.00, accept len: 2.51, cuda graph: True, gen throughput (token/s): 170.25, #queue-req: 0")


def mangle(rng: random.Random, line: str) -> str:
    """The line cut short, flooded, with a count made negative or NaN, or random bytes."""
    r = rng.random()
    if r < 0.2:
        return line[: rng.randint(0, len(line))]
    if r < 0.3:
        at = rng.randint(0, len(line))
        return line[:at] + rng.choice(["9", "1.", ", ", "x"]) * rng.randint(10_000, 200_000) + line[at:]
    if r < 0.5:
        digits = [i for i, c in enumerate(line) if c.isdigit()]
        if digits:
            at = rng.choice(digits)
            return line[:at] + rng.choice(["-", "nan", "NaN", "inf", "-1", "1e309"]) + line[at + 1:]
    if r < 0.6:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))).decode("utf-8", "replace")
    if r < 0.7:
        return line.replace(" ", "\x00", rng.randint(1, 3))
    return line


def lines_for(rng: random.Random, good: list[str], n: int = 120) -> list[str]:
    out = []
    for _ in range(n):
        out.append(mangle(rng, rng.choice(good)))
        if rng.random() < 0.3:
            out.append("INFO noise " + "y" * rng.randint(0, 50))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_vllm_every_metrics_line_is_a_window_or_a_counted_skip(seed):
    rng = random.Random(seed)
    good = [v1_line(rng, rng.randint(1, 5), rng.random() < 0.5) for _ in range(20)] + [V0]
    lines = lines_for(rng, good)
    for drafter in ("auto", "fixed", "variable"):
        r = vllm_log.parse_log(lines, "f.log", drafter)  # type: ignore[arg-type]
        marked = sum(vllm_log.V1_MARKER in ln or vllm_log.V0_MARKER in ln for ln in lines)
        assert len(r.windows) + r.skipped.count == marked
        for w in r.windows:
            p = w.profile
            assert p.accepted_tokens is None or 0 <= p.accepted_tokens <= (p.draft_tokens or 0)
            assert p.drafts is None or p.drafts >= 0


@pytest.mark.parametrize("seed", range(6))
def test_llamacpp_every_request_line_is_a_window_or_a_counted_skip(seed):
    rng = random.Random(seed)
    lines = lines_for(rng, [LLAMA])
    r = llamacpp.parse_log(lines, "f.log")
    marked = sum(llamacpp.MARKER in ln for ln in lines)
    assert len(r.windows) + r.skipped.count == marked
    for w in r.windows:
        assert 0 <= w.profile.accepted_tokens <= w.profile.draft_tokens


@pytest.mark.parametrize("seed", range(4))
def test_llamacpp_statistics_lines_never_crash_and_bad_ones_are_counted(seed):
    rng = random.Random(seed)
    lines = lines_for(rng, [LLAMA_STATS])
    r = llamacpp.parse_log(lines, "f.log")
    marked = sum(llamacpp.STATS_MARKER in ln for ln in lines)
    readable = sum(llamacpp._parse_statistics(ln) is not None for ln in lines
                   if llamacpp.STATS_MARKER in ln)
    assert r.skipped.count == marked - readable
    assert all(w.profile.accepted_tokens <= w.profile.draft_tokens for w in r.windows)


@pytest.mark.parametrize("seed", range(4))
def test_sglang_lines_never_crash(seed):
    rng = random.Random(seed)
    lines = lines_for(rng, [SGLANG])
    r = sglang.parse_log(lines, "f.log")
    for w in r.windows:
        assert w.profile.reported_mean_acceptance_length >= 1.0


DUMP = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="lab"} 197.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="lab"} 533.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="lab"} 280.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="lab",position="0"} 129.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="lab",position="1"} 85.0
"""


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("reader", [prometheus.parse_text, llamacpp.profile_from_prometheus,
                                    sglang.profile_from_prometheus],
                         ids=["vllm", "llamacpp", "sglang"])
def test_metrics_readers_refuse_bad_text_with_a_clear_error(seed, reader):
    rng = random.Random(seed)
    dump = DUMP.replace("vllm:", "llamacpp:") if reader is llamacpp.profile_from_prometheus else DUMP
    text = "\n".join(mangle(rng, ln) for ln in dump.splitlines()) + "\n"
    try:
        out = reader(text)
    except InputError as exc:
        assert "\x00" not in str(exc) and len(str(exc)) < 600
        return
    p = getattr(out, "profile", out)
    for x in (p.drafts, p.draft_tokens, p.accepted_tokens):
        assert x is None or x >= 0


@pytest.mark.parametrize("value", ["-5", "NaN", "+Inf", "1.5"])
def test_a_counter_that_is_not_a_count_is_refused(value):
    bad = DUMP.replace("} 197.0", "} " + value)
    with pytest.raises(InputError, match="not a count"):
        prometheus.parse_text(bad)
    with pytest.raises(InputError, match="not a count"):
        llamacpp.profile_from_prometheus(bad.replace("vllm:", "llamacpp:"))


def _cli(*args: str, stdin: bytes | None = None):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], input=stdin,
                          capture_output=True, env=env, timeout=120)


def test_metrics_on_a_binary_file_does_not_echo_its_bytes(tmp_path):
    blob = tmp_path / "model.bin"
    blob.write_bytes(b"\x00\x01\xfe\xff vllm:spec_decode_num_drafts_total \x1b[31m" * 50)
    for args, stdin in (([str(blob)], None), (["-"], blob.read_bytes())):
        res = _cli("metrics", *args, "--no-store", stdin=stdin)
        assert res.returncode == 2 and b"binary file" in res.stderr
        assert b"\x00" not in res.stderr and b"\x1b" not in res.stderr and b"Traceback" not in res.stderr


def test_a_log_whose_only_metrics_line_is_malformed_says_which_and_why(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO starting\n(APIServer pid=1) INFO 11-29 08:36:52 [metrics.py:120] "
                   "SpecDecoding metrics: Mean acceptance length: 5.00, Accepted throughput: 34.07 "
                   "tokens/s, Drafted throughput: 34.07 tokens/s, Accepted: 136 tok\n")
    res = _cli("logs", str(log), "--no-store")
    err = res.stderr.decode()
    assert res.returncode == 2 and "Traceback" not in err
    assert "1 malformed metrics line(s) skipped" in err and f"{log}:2:" in err
    assert "without Accepted/Drafted counts" in err


def test_a_binary_log_is_refused(tmp_path):
    blob = tmp_path / "core.dump"
    blob.write_bytes(b"\x00" * 100 + b"SpecDecoding metrics: \xff\xfe")
    res = _cli("logs", str(blob), "--no-store")
    assert res.returncode == 2 and b"binary file" in res.stderr and b"\x00" not in res.stderr
