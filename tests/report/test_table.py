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


def test_an_unprinted_draft_count_shows_the_range_the_counts_allow():
    """llama-server's older request line (118 accepted / 144 generated, no mean): drafts from 1
    to 144, so accepted per draft from 118/144 to 118: the table says so, never a value."""
    p = AcceptanceProfile(drafts=None, draft_tokens=144, accepted_tokens=118,
                          drafts_range=(1, 144))
    text = _text(profile_table(p, "t"))
    assert "1–144" in text and "not printed" in text
    assert "0.82–118.00" in text and "1.82–119.00" in text
    assert "unknown" not in text
