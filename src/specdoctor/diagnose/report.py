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
    lines += root_cause_lines(d)
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


def root_cause_lines(d: Any) -> list[str]:
    """How the root cause was reached (its basis and the deciding evidence) and, where a
    verdict patch confirmed it, the upstream report, the fix and the stop-gap."""
    e = d.ledger.entry(d.root_cause) if d.root_cause else None
    if e is None:
        return []
    out = []
    decisive = [x for x in e.evidence if e.decided_by and x.startswith(f"[{e.decided_by}]")]
    if e.basis or decisive:
        out += [f"Reached by {e.basis or 'an experiment'}"
                + (f" ({e.decided_by})" if e.decided_by else "") + ":"
                + (f" {decisive[-1]}" if decisive else ""), ""]
    for fix in patch_fixes(d, d.root_cause):
        out += ["### Fix", ""]
        out += [f"- upstream {c['what']}: {c['ref']} ({c['state']}) {c['url']}"
                if c.get("state") else f"- upstream {c['what']}: {c['ref']} {c['url']}"
                for c in fix["patch"]["citations"]]
        out += [f"- the defect: {fix['patch']['defect']}",
                f"- the fix: {fix['patch']['fix']}; take it with an engine release that "
                f"includes it",
                f"- until then, serve with the verdict patch: `{fix['stop_gap']}`", ""]
    return out


def patch_fixes(d: Any, hypothesis: str | None) -> list[dict[str, Any]]:
    """The verdict patches that confirmed ``hypothesis`` (experiment verdict-patch)."""
    out = []
    for r in d.ledger.results:
        if r.experiment != "verdict-patch":
            continue
        confirmed = any(f.hypothesis == hypothesis and f.verdict.value == "confirmed"
                        for f in r.findings)
        for num in r.numbers.values():
            if confirmed and isinstance(num, dict) and "stop_gap" in num \
                    and num.get("patch", {}).get("hypothesis") == hypothesis:
                out.append(num)
    return out


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
