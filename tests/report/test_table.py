"""The tables every command prints: conventions named per engine, times whole, notes once."""

from __future__ import annotations

import io

from rich.console import Console

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.report.table import (mal_convention, print_notes, profile_table, source_names,
                                     windows_table)
from specdoctor.sources.base import Window


def _text(renderable: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200).print(renderable)
    return buf.getvalue()


P = AcceptanceProfile(drafts=10, draft_tokens=30, accepted_tokens=12,
                      accepted_per_position=(6, 4, 2), k=3)


def test_mean_acceptance_length_convention_names_the_engine_it_is_for():
    assert "SGLang's \"accept len\"" in _text(profile_table(P, "t", engine="sglang"))
    vllm = _text(profile_table(P, "t", engine="vllm"))
    assert "vLLM's \"Mean acceptance length\"" in vllm and "SGLang" not in vllm
    generic = _text(profile_table(P, "t"))
    assert "bonus token counted" in generic and "vLLM" not in generic and "SGLang" not in generic
    assert mal_convention("llamacpp").endswith("(as llama.cpp's \"mean acceptance length\")")


def test_window_times_are_printed_whole_and_files_told_apart():
    ws = [Window("vllm", "runs/a/server.log", 7, P, timestamp="2026-11-30 08:39:19.123"),
          Window("vllm", "runs/b/server.log", 9, P, timestamp="11-30 08:39:21")]
    out = _text(windows_table(ws, 2))
    assert "2026-11-30 08:39:19.123" in out and "11-30 08:39:21" in out
    assert "a/server.log:7" in out and "b/server.log:9" in out
    assert source_names(["x/one.log", "y/two.log"]) == {"x/one.log": "one.log",
                                                         "y/two.log": "two.log"}
    assert source_names(["-"]) == {"-": "-"}


def test_a_note_prints_once_and_brackets_survive():
    buf = io.StringIO()
    con = Console(file=buf, width=200)
    print_notes(con, ["k unknown [pass --drafter]", "other", "k unknown [pass --drafter]"])
    out = buf.getvalue()
    assert out.count("k unknown [pass --drafter]") == 1 and out.count("note:") == 2


EVIDENCE = ("the counterfactual with rms_norm_eps 1e-06 recovers 3.60 of 4 accepted draft tokens "
            "per step (0.36 before): the field is the cause; to see it again run specdoctor "
            "ledger show 12 --json and read /tmp/specdoctor-diagnose-abc123/report.md")


def _evidence_column(text: str) -> list[str]:
    """The evidence cells of a rendered ledger table, row by row, lines joined."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("│"):
            cells = line.split("│")[1:-1]
            if cells[1].strip():  # a row's first line holds its cost
                rows.append([])
            rows[-1].append(cells[-1].strip())
    return [" ".join(r) for r in rows]


def test_ledger_evidence_wraps_whole_in_80_columns():
    from specdoctor.report.table import ledger_table

    rows = [{"id": "draft-config-mismatch", "experiment": "relaunch-counterfactual",
             "cost": {"cpu_min": 1.5, "gpu_min": 0, "restarts": 0}, "verdict": "confirmed",
             "evidence": ["an earlier note", EVIDENCE]},
            {"id": "k-beyond-training", "experiment": "trained-depth",
             "cost": {"cpu_min": 0.1, "gpu_min": 0, "restarts": 0}, "verdict": "inconclusive",
             "evidence": ["k=2 is within the trained depth 1"]}]
    con = Console(width=80, record=True, file=io.StringIO())
    con.print(ledger_table(rows))
    text = con.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    first, second = _evidence_column(text)
    assert "".join(first.split()) == "".join(EVIDENCE.split())  # nothing cut, nothing added
    assert "specdoctor ledger show 12 --json" in first  # the suggested command, words whole
    assert second == "k=2 is within the trained depth 1"
    assert "…" not in text  # nothing ellipsized, an experiment's name neither


def test_an_unprinted_draft_count_shows_the_range_the_counts_allow():
    """llama-server's older request line (118 accepted / 144 generated, no mean): drafts from 1
    to 144, so accepted per draft from 118/144 to 118: the table says so, never a value."""
    p = AcceptanceProfile(drafts=None, draft_tokens=144, accepted_tokens=118,
                          drafts_range=(1, 144))
    text = _text(profile_table(p, "t"))
    assert "1–144" in text and "not printed" in text
    assert "0.82–118.00" in text and "1.82–119.00" in text
    assert "unknown" not in text


def test_a_range_that_prints_as_one_number_is_that_number():
    # 1650 accepted over 1000 to 1001 drafts: 2.650 to 2.648, both "2.65" at two decimals
    p = AcceptanceProfile(drafts=None, draft_tokens=3000, accepted_tokens=1650,
                          drafts_range=(1000, 1001))
    buf = io.StringIO()
    Console(file=buf, width=200).print(profile_table(p, "t"))
    out = buf.getvalue()
    assert "2.65–2.65" not in out and "1.65–1.65" not in out
    row = next(ln for ln in out.splitlines() if "mean acceptance length" in ln)
    assert "2.65" in row and "1,000–1,001" in out
