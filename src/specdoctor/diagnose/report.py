"""The diagnosis report: Markdown and a self-contained HTML page (inline SVG curves), each
built from the diagnosis itself.

Sections: the signature with its evidence, the root cause, the ledger in verdict-cost order,
each experiment's numbers, and the per-position curve before/after wherever an experiment
changed one thing and measured again.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile


CONVENTIONS = ("Conventions: per-position rates are unconditional (accepted at i / drafts); "
               "accepted per draft does not count the bonus token; mean acceptance length does.")


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
    words = answer_words(d.root_cause, d.root_cause_basis, d.undetermined, sig.cls,
                         d.ledger.to_json())
    lines += ["## Root cause", "", f"**{words[0]}**" if d.root_cause else words[0], ""]
    lines += [w for x in words[1:] for w in (x, "")]
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
        lines += ["## Notes", ""] + [f"- {n}" for n in dict.fromkeys(d.notes)] + [""]
    lines += [CONVENTIONS, ""]
    return "\n".join(lines)


def answer_words(root: str | None, basis: str | None, undetermined: dict[str, Any] | None,
                 signature_class: str, ledger: Sequence[dict[str, Any]] | None = None
                 ) -> list[str]:
    """The answer in words, from the diagnosis or its stored JSON: the root cause with how it
    was reached, or "not determined" with the candidates that remain and why, or none (healthy,
    or a symptom that needs no cause). ``ledger`` (its entries as JSON, where known) says which
    none: no hypothesis was a candidate, every one tested was excluded, or some stay open.
    The first line is the answer; the others explain it."""
    if root:
        return [root + (f" (basis: {basis})" if basis else "")]
    und = undetermined or {}
    cands, why = list(und.get("candidates") or []), str(und.get("why") or "")
    if cands:
        return [f"not determined: these remain: {', '.join(cands)}", f"why: {why}"]
    if why:
        return ["not determined: no candidate remains", f"why: {why}"]
    if signature_class == "healthy":
        return ["none: healthy"]
    if ledger is not None and not ledger:
        return [f"none: the signature ({signature_class}) leaves no candidate cause to test"]
    if ledger and all(e.get("verdict") == "excluded" for e in ledger):
        return [f"none: every hypothesis tested was excluded ({len(ledger)} in the ledger)"]
    return ["none confirmed (see the ledger for what is still open)"]


def root_cause_lines(d: Any) -> list[str]:
    """How the root cause was reached (its basis and the deciding evidence) and, where a
    verdict patch confirmed it, the upstream report, the fix and the stop-gap."""
    e = d.ledger.entry(d.root_cause) if d.root_cause else None
    if e is None:
        return also_lines(d)
    out = []
    decisive = [x for x in e.evidence if e.decided_by and x.startswith(f"[{e.decided_by}]")]
    if e.basis or decisive:
        out += [f"Reached by {e.basis or 'an experiment'}"
                + (f" ({e.decided_by})" if e.decided_by else "") + ":"
                + (f" {decisive[-1]}" if decisive else ""), ""]
    m = getattr(d, "root_cause_mechanism", None)
    if m:
        out += [f"Mechanism ({m['experiment']}, {m['id']}): {m['text']}", ""]
    out += [explains_words(getattr(d, "explains", {}).get(d.root_cause)), ""]
    out += also_lines(d)
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


def explains_words(x: dict[str, Any] | None) -> str:
    """What a cause accounts for (rule cause-sized), in a sentence."""
    if not x:
        return ("How much of the loss it explains: not sized (the experiment that confirmed it "
                "states no loss in accepted tokens per step).")
    iv = x.get("interval")
    out = f"It explains {x['loss']:+.3f} {x.get('unit', 'accepted per step')}"
    if iv:
        out += f" (95% [{iv[0]:+.3f}, {iv[1]:+.3f}])"
    gap = x.get("gap")
    if gap and x.get("share_of_gap") is not None:
        out += (f", {x['share_of_gap']:.0%} of the {x['on']} gap of {gap['gap']:.3f} to "
                f"{gap['against']}")
    return out + (f"; sized by {x['how']}." if x.get("how") else ".")


def also_lines(d: Any) -> list[str]:
    """The confirmed causes that explain too little to be the answer (rule cause-sized)."""
    out = []
    for h, why in getattr(d, "also_found", []):
        out += [f"Also found, not the cause: {h}: {why}", ""]
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


# The ledger table wraps its evidence at word boundaries (a path or a command breaks only where
# it must); each experiment puts its figure beside its findings, below them on a narrow screen.
CSS = """
td.evidence{overflow-wrap:anywhere;min-width:16em}
tr.confirmed td.verdict{color:#080;font-weight:bold}tr.excluded td.verdict{color:#777}
section.experiment{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start;
border-top:1px solid #ddd;padding-top:.5em}
section.experiment .text{flex:1 1 26em;min-width:0}
section.experiment .figure{flex:0 1 34em;min-width:0}
section.experiment .figure svg{max-width:100%;height:auto}
p.conventions{color:#555;font-size:13px}"""


def html_page(d: Any, target: str) -> str:
    """The diagnosis as a self-contained HTML page: headings, the ledger as a table, and each
    experiment's findings with its before/after curves (inline SVG) beside them."""
    from specdoctor.report.html import esc, page

    sig = d.signature
    body = [f"<p>Target: <code>{esc(target)}</code></p>",
            f"<h2>Signature: {esc(sig.cls)}</h2><p>{esc(sig.evidence)}</p>"]
    if sig.also:
        body.append(f"<p>Also: {esc(', '.join(sig.also))}</p>")
    body.append(f"<h2>Root cause</h2><p>{_root_cause(d)}</p>")
    body += [f"<p>{esc(w)}</p>" for w in answer_words(
        d.root_cause, d.root_cause_basis, d.undetermined, sig.cls, d.ledger.to_json())[1:]]
    body += [f"<p>{esc(line.lstrip('#- '))}</p>" for line in root_cause_lines(d) if line]
    if d.other_causes:
        body.append(f"<p>Other confirmed causes: {esc(', '.join(d.other_causes))}</p>")
    body.append("<h2>Ledger (verdict-cost order)</h2><table id='ledger'><tr><th>hypothesis</th>"
                "<th>experiment</th><th>cost (CPU min / GPU min / restarts)</th><th>verdict</th>"
                "<th>evidence</th></tr>")
    for e in d.ledger.entries:
        body.append(f"<tr class='{esc(e.verdict.value)}'><td>{esc(e.hypothesis)}</td>"
                    f"<td>{esc(e.experiment)}</td><td>{e.cost.cpu_min:g} / {e.cost.gpu_min:g} / "
                    f"{e.cost.restarts}</td><td class='verdict'>{esc(e.verdict.value)}</td>"
                    f"<td class='evidence'>{esc(e.evidence[-1] if e.evidence else '')}</td></tr>")
    body.append("</table><h2>Experiments</h2>")
    body += [_experiment(r) for r in d.ledger.results]
    if d.notes:
        body.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>"
                                                   for n in dict.fromkeys(d.notes))
                    + "</ul>")
    body.append(f"<p class='conventions'>{esc(CONVENTIONS)}</p>")
    return page("specdoctor — diagnosis", body, CSS)


def _root_cause(d: Any) -> str:
    from specdoctor.report.html import esc

    first = answer_words(d.root_cause, d.root_cause_basis, d.undetermined, d.signature.cls,
                         d.ledger.to_json())[0]
    return f"<b>{esc(first)}</b>" if d.root_cause else esc(first)


def _experiment(r: Any) -> str:
    """One experiment: its findings, curves as figures and commands, its plot beside them."""
    from specdoctor.report.html import esc
    from specdoctor.report.plot import per_position_svg

    text = [f"<h3>{esc(r.experiment)} ({r.wall_s:.1f} s)</h3>"]
    if r.error:
        text.append(f"<p class='failed'>Error: {esc(r.error)}</p>")
    items = [f"<li>{esc(f.hypothesis)}: <b>{esc(f.verdict.value)}</b> — {esc(f.evidence)}</li>"
             for f in r.findings]
    items += [f"<li>{esc(name)}: {esc(_pp(prof))}</li>" for name, prof in r.curves.items()]
    items += [f"<li>command: <code>{esc(c)}</code></li>" for c in r.commands]
    if items:
        text.append("<ul>" + "".join(items) + "</ul>")
    curves = {k: v for k, v in r.curves.items() if v is not None and v.per_position}
    figure = (f"<div class='figure'>{per_position_svg(curves, r.experiment)}</div>"
              if len(curves) >= 2 else "")
    return (f"<section class='experiment' id='{esc(r.experiment)}'>"
            f"<div class='text'>{''.join(text)}</div>{figure}</section>")


def write_report(d: Any, folder: Path, target: str) -> Path | None:
    """report.md and report.html in ``folder``; returns the Markdown path (None if unwritable)."""
    from specdoctor.errors import InputError
    from specdoctor.report.files import write_file

    md = markdown(d, target)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # replaced, never written through: a symlink already in the folder is not followed
        write_file(folder / "report.md", md)
        write_file(folder / "report.html", html_page(d, target))
    except (OSError, InputError):
        return None
    return folder / "report.md"
