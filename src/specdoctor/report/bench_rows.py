"""The labelled rows of a benchmark as text: one formatting for the console, Markdown and HTML."""

from __future__ import annotations

from collections.abc import Sequence

from specdoctor.bench.summary import Row


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["configuration", "cell", "status", "AL [95% CI]", "accept rate", "tok/s",
            "spread", "tok/s/stream", "speedup", "TTFT p50 ms", "ITL p50 ms", "TPOT p50 ms",
            "failures"]
    body = []
    for r in rows:
        p = r.profile
        al = "no drafts" if p is not None and p.drafts == 0 else "—"
        if p is not None and p.mean_acceptance_length is not None:
            iv = p.intervals.get("mean_acceptance_length")
            al = f"{p.mean_acceptance_length:.2f}" + (f" [{iv.low:.2f}–{iv.high:.2f}]" if iv else "")
        spread = "—" if r.tok_s is None or r.tok_s.basis == "none" else \
            f"{r.tok_s.low:.1f}–{r.tok_s.high:.1f} ({r.tok_s.basis})"
        speed = "—" if r.speedup is None else \
            f"{r.speedup:.2f}×" + ("" if r.speedup_significant else " (not significant)")
        body.append([r.config, r.cell, r.status, al, _f(p.acceptance_rate if p else None, ".3f"),
                     _f(r.tok_s.value if r.tok_s else None, ".1f"), spread,
                     _f(r.stream_tok_s, ".1f"), speed,
                     _f(r.ttft_p50 * 1000 if r.ttft_p50 is not None else None, ".0f"),
                     _f(r.itl_p50 * 1000 if r.itl_p50 is not None else None, ".1f"),
                     _f(r.tpot_p50 * 1000 if r.tpot_p50 is not None else None, ".1f"),
                     ", ".join(f"{n} {k}" for k, n in r.failures.items()) or "none"])
    return head, body


def grouped_errors(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """Each distinct error once, with the cells it hit (a failed launch fails every cell)."""
    cells: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        for e in r.errors:
            cells.setdefault((r.config, e), []).append(r.cell)
    return [(f"{cfg} {', '.join(cs) if len(cs) < 3 else f'({len(cs)} cells)'}", err)
            for (cfg, err), cs in cells.items()]
