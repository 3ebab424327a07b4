"""Readable tables of acceptance profiles (rich), the non-JSON face of every command."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.sources.base import Window


def _f(x: float | None, nd: int = 3) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _i(x: int | None) -> str:
    return "unknown" if x is None else f"{x:,}"


def _ci(p: AcceptanceProfile, name: str, nd: int = 3) -> str:
    iv = p.intervals.get(name)
    return "" if iv is None else f"{iv.low:.{nd}f} – {iv.high:.{nd}f}"


def profile_table(p: AcceptanceProfile, title: str) -> Table:
    t = Table(title=title, show_header=True, header_style="bold", title_justify="left")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("95% CI", justify="center")
    t.add_column("convention")
    t.add_row("drafts", _i(p.drafts), "", "verify steps with a draft")
    t.add_row("draft tokens", _i(p.draft_tokens), "", f"k = {p.k if p.k is not None else '?'}")
    t.add_row("accepted tokens", _i(p.accepted_tokens), "", "bonus token not counted")
    t.add_row("mean acceptance length", _f(p.mean_acceptance_length, 2),
              _ci(p, "mean_acceptance_length", 2), "bonus token counted (vLLM)")
    t.add_row("accepted per draft", _f(p.accepted_per_draft, 2),
              _ci(p, "accepted_per_draft", 2), "bonus token not counted")
    t.add_row("acceptance rate", _f(p.acceptance_rate), _ci(p, "acceptance_rate"),
              "accepted / draft tokens")
    uncond = p.per_position or []
    cond = p.per_position_conditional or []
    for i, r in enumerate(uncond):
        c = cond[i] if i < len(cond) else None
        given = f"; given 0..{i - 1}: {_f(c)}" if i else ""
        t.add_row(f"position {i}", _f(r), _ci(p, f"per_position[{i}]"), "unconditional" + given)
    if not p.count_weighted:
        t.caption = "rates only: the source carries no counts, aggregates are unweighted"
    return t


def windows_table(windows: Sequence[Window], count: int, limit: int = 20) -> Table:
    t = Table(title=f"windows ({count}; last {min(limit, len(windows))} shown)",
              header_style="bold", title_justify="left")
    t.add_column("file:line", overflow="fold")
    t.add_column("time", no_wrap=True)
    for col in ("drafts", "drafted", "acc", "AL"):
        t.add_column(col, justify="right", no_wrap=True, min_width=4)
    t.add_column("per position")
    for w in windows[-limit:]:
        p = w.profile
        pos = " ".join(_f(x, 2) for x in (p.per_position or [])) or "—"
        t.add_row(f"{Path(w.source).name}:{w.line}", (w.timestamp or "")[-8:], _i(p.drafts), _i(p.draft_tokens),
                  _i(p.accepted_tokens), _f(p.mean_acceptance_length, 2), pos)
    return t


def print_notes(console: Console, notes: Sequence[str]) -> None:
    for n in notes:
        console.print(f"[yellow]note:[/yellow] {n}", highlight=False)
