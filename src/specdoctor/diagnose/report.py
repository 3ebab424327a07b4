"""The diagnosis report: Markdown and a self-contained HTML page (inline SVG curves).

Sections: the signature with its evidence, the root cause, the ledger in verdict-cost order,
each experiment's numbers, and the per-position curve before/after wherever an experiment
changed one thing and measured again.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile


def _pp(p: AcceptanceProfile | None) -> str:
    if p is None or p.per_position is None:
        return "—"
    return " / ".join(f"{x:.3f}" for x in p.per_position)


def markdown(d: Any, target: str) -> str:
    sig = d.signature
    lines = ["# specdoctor diagnosis", "", f"Target: `{target}`", "",
             f"## Signature: {sig.cls}", "", sig.evidence, ""]
    if sig.also:
        lines += [f"Also: {', '.join(sig.also)}", ""]
    lines += ["## Root cause", "",
              f"**{d.root_cause}**" if d.root_cause else
              ("none: healthy" if sig.cls == "healthy" else
               "none confirmed (see the ledger for what is still open)"), ""]
    if d.other_causes:
        lines += [f"Other confirmed causes: {', '.join(d.other_causes)}", ""]
    lines += ["## Ledger (verdict-cost order)", "",
              "| hypothesis | experiment | cost (CPU min / GPU min / restarts) | verdict | evidence |",
              "|---|---|---|---|---|"]
    for e in d.ledger.entries:
        ev = (e.evidence[-1] if e.evidence else "").replace("|", "\\|")
        lines.append(f"| {e.hypothesis} | {e.experiment} | {e.cost.cpu_min:g} / "
                     f"{e.cost.gpu_min:g} / {e.cost.restarts} | {e.verdict.value} | {ev} |")
    lines += ["", "## Experiments", ""]
    for r in d.ledger.results:
        lines.append(f"### {r.experiment} ({r.wall_s:.1f} s)")
        lines.append("")
        if r.error:
            lines += [f"Error: {r.error}", ""]
        for f in r.findings:
            lines.append(f"- {f.hypothesis}: {f.verdict.value} — {f.evidence}")
        for name, prof in r.curves.items():
            lines.append(f"- {name}: {_pp(prof)}")
        for c in r.commands:
            lines.append(f"- command: `{c}`")
        lines.append("")
    if d.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in d.notes] + [""]
    lines += ["Conventions: per-position rates are unconditional (accepted at i / drafts); "
              "accepted per draft does not count the bonus token; mean acceptance length does.",
              ""]
    return "\n".join(lines)


def html_page(d: Any, target: str, md: str) -> str:
    from specdoctor.report.plot import per_position_svg

    svgs = []
    for r in d.ledger.results:
        curves = {k: v for k, v in r.curves.items() if v is not None and v.per_position}
        if len(curves) >= 2:
            svgs.append(f"<h3>{html.escape(r.experiment)}</h3>"
                        + per_position_svg(curves, r.experiment))
    return ("<!doctype html><meta charset='utf-8'><title>specdoctor diagnosis</title>"
            "<style>body{font-family:sans-serif;max-width:70em;margin:auto}"
            "pre{white-space:pre-wrap}</style>"
            f"<pre>{html.escape(md)}</pre>" + "".join(svgs))


def write_report(d: Any, folder: Path, target: str) -> Path | None:
    """report.md and report.html in ``folder``; returns the Markdown path (None if unwritable)."""
    md = markdown(d, target)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.md").write_text(md)
        (folder / "report.html").write_text(html_page(d, target, md))
    except OSError:
        return None
    return folder / "report.md"
