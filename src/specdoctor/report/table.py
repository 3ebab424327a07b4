"""Readable tables of acceptance profiles (rich), the non-JSON face of every command."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.safe_text import markup, visible
from specdoctor.sources.base import Window


def _f(x: float | None, nd: int = 3) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _i(x: int | None) -> str:
    return "unknown" if x is None else f"{x:,}"


def _span(x: float | None, span: tuple[float, float] | None, nd: int = 2, shift: float = 0.0
          ) -> str:
    """A figure, or (unknown, but bounded) the range the counts allow: never a made-up value."""
    if x is None and span is not None:
        lo, hi = f"{span[0] + shift:.{nd}f}", f"{span[1] + shift:.{nd}f}"
        return lo if lo == hi else f"{lo}–{hi}"   # a range of one value is that value
    return _f(x, nd)


def _ci(p: AcceptanceProfile, name: str, nd: int = 3) -> str:
    iv = p.intervals.get(name)
    return "" if iv is None else f"{iv.low:.{nd}f} – {iv.high:.{nd}f}"


# What "mean acceptance length" is called where each engine prints it; every engine's figure
# counts the bonus token (1 + accepted / drafts).
_MAL_NAME = {
    "vllm": "vLLM's \"Mean acceptance length\"",
    "sglang": "SGLang's \"accept len\"",
    "llamacpp": "llama.cpp's \"mean acceptance length\"",
}


def mal_convention(engine: str | None) -> str:
    """The convention cell of the mean acceptance length row, named for ENGINE when known."""
    name = _MAL_NAME.get(engine or "")
    return "bonus token counted" + (f" (as {name})" if name else "")


def profile_table(p: AcceptanceProfile, title: str, engine: str | None = None) -> Table:
    """The figures of one profile with their intervals and conventions. ENGINE (vllm, sglang,
    llamacpp) names the engine's own figure beside the convention; None leaves it generic."""
    t = Table(title=visible(title), show_header=True, header_style="bold", title_justify="left")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("95% CI", justify="center")
    t.add_column("convention")
    drafts = (f"{p.drafts_range[0]:,}–{p.drafts_range[1]:,}" if p.drafts is None
              and p.drafts_range is not None and p.drafts_range[0] != p.drafts_range[1]
              else f"{p.drafts_range[0]:,}" if p.drafts is None and p.drafts_range is not None
              else _i(p.drafts))
    t.add_row("drafts", drafts, "", "verify steps with a draft"
              + ("; not printed: the range the counts allow" if p.drafts is None
                 and p.drafts_range is not None else ""))
    t.add_row("draft tokens", _i(p.draft_tokens), "", f"k = {p.k if p.k is not None else '?'}")
    t.add_row("accepted tokens", _i(p.accepted_tokens), "", "bonus token not counted")
    span = p.mean_acceptance_length_range if p.count_weighted else None
    t.add_row("mean acceptance length", _span(p.mean_acceptance_length, span),
              _ci(p, "mean_acceptance_length", 2), mal_convention(engine))
    t.add_row("accepted per draft", _span(p.accepted_per_draft, span, shift=-1.0),
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
    t.add_column("time (as logged)", no_wrap=True)
    for col in ("drafts", "drafted", "acc", "AL"):
        t.add_column(col, justify="right", no_wrap=True, min_width=4)
    t.add_column("per position")
    shown = windows[-limit:]
    names = source_names([w.source for w in shown])
    for w in shown:
        p = w.profile
        pos = " ".join(_f(x, 2) for x in (p.per_position or [])) or "—"
        t.add_row(f"{markup(names[w.source])}:{w.line}", markup(w.timestamp or "—"), _i(p.drafts),
                  _i(p.draft_tokens), _i(p.accepted_tokens), _f(p.mean_acceptance_length, 2), pos)
    return t


def source_names(sources: Sequence[str]) -> dict[str, str]:
    """The shortest path suffix that tells each source apart (a/server.log, b/server.log)."""
    paths = {s: Path(s).parts or (s,) for s in set(sources)}
    out: dict[str, str] = {}
    for s, parts in paths.items():
        for n in range(1, len(parts) + 1):
            tail = parts[-n:]
            if all(o == s or tuple(op[-n:]) != tuple(tail) for o, op in paths.items()):
                break
        out[s] = "/".join(tail)
    return out


def print_notes(console: Console, notes: Sequence[str]) -> None:
    """Each note once, in first-seen order (a window's note repeated by its total is one note)."""
    for n in dict.fromkeys(notes):
        console.print(f"[yellow]note:[/yellow] {markup(n)}", highlight=False)


def ledger_table(entries: Sequence[dict]) -> Table:
    """A ledger (``Ledger.to_json()``, as stored) as a table: each hypothesis with the experiment
    that decides it, its cost, its verdict and its last evidence in full. The evidence wraps at
    word boundaries and nothing is cut, so a command it suggests stays whole in 80 columns."""
    t = Table(header_style="bold", caption="cost: CPU/GPU minutes, server restarts",
              caption_justify="left")
    t.add_column("hypothesis (experiment)", overflow="fold")  # a long name folds, never cut
    t.add_column("cost", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    t.add_column("evidence", ratio=1, overflow="fold")
    for e in entries:
        c = e.get("cost") or {}
        cost = f"{c.get('cpu_min', 0):g}/{c.get('gpu_min', 0):g}, {c.get('restarts', 0)}"
        evidence = e.get("evidence") or []
        name = markup(e.get("id", ""))
        if e.get("experiment"):
            name += f"\n[dim]({markup(e['experiment'])})[/dim]"
        t.add_row(name, cost, markup(e.get("verdict", "")),
                  markup(evidence[-1], keep_newline=True) if evidence else "")
    return t
