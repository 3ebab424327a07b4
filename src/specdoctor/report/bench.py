"""The report of a bench or sweep run: Markdown (figures as PNG files beside it) and one
self-contained HTML file (figures inlined), from the same content.

It holds the labelled table (one row per configuration × cell), the verdicts (the winner of
each workload, configurations it does not significantly beat named as ties), per-position
acceptance curves per configuration with their 95% bands, acceptance length and tok/s against
k per method, speedup against the spec-off baseline, the accepted-per-step histograms, the
failures, and the exact command and environment of every configuration.

It renders what it is handed (a run and its cells, as the store holds them); the command reads
the store.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.bench import summary
from specdoctor.bench.summary import Row, Winner
from specdoctor.errors import InputError
from specdoctor.report.bench_rows import grouped_errors, table
from specdoctor.report.files import write_file
from specdoctor.report.html import page
from specdoctor.report.plot import COLOURS, draw_per_position, new_figure


class Run(Protocol):
    """A recorded bench or sweep run (the store's ``BenchRun``)."""

    kind: str
    status: str
    created_at: float
    params: dict[str, Any]
    configs: list[dict[str, Any]]


@dataclass
class Figure:
    name: str  # file stem
    title: str
    png: bytes


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _method_k(label: str) -> tuple[str, int] | None:
    m = re.match(r"^(?:[\w.-]+:)?([\w-]+):k=(\d+)", label)
    return (m.group(1), int(m.group(2))) if m else None


def config_colours(rows: Sequence[Row]) -> dict[str, str]:
    """One colour per configuration, the same in every figure."""
    return {cfg: COLOURS[n % len(COLOURS)]
            for n, cfg in enumerate(dict.fromkeys(r.config for r in rows))}


def figures(rows: Sequence[Row]) -> list[Figure]:
    out: list[Figure] = []
    spec_rows = [r for r in rows if r.profile is not None and r.profile.per_position]
    colours = config_colours(rows)
    workloads = sorted({(r.suite, r.sampling) for r in spec_rows})
    if workloads:
        fig, axes = new_figure(6.4, 3.6, ncols=min(2, len(workloads)),
                               nrows=(len(workloads) + 1) // 2)
        flat = [a for row in axes for a in row]
        for ax, (suite, sampling) in zip(flat, workloads):
            series: dict[str, AcceptanceProfile] = {}
            by_cfg: dict[str, list[Row]] = defaultdict(list)
            for r in spec_rows:
                if (r.suite, r.sampling) == (suite, sampling):
                    by_cfg[r.config].append(r)
            for cfg, rs in by_cfg.items():
                merged = summary.merged_profile(rs)
                if merged is not None:
                    series[cfg] = merged
            draw_per_position(ax, series, f"{suite} · {sampling}", colours)
        for ax in flat[len(workloads):]:
            ax.set_visible(False)
        out.append(Figure("per_position", "Per-position acceptance (95% bands)", _png(fig)))
    out += _vs_k(rows)
    sp = [r for r in rows if r.speedup is not None]
    if sp:
        out.append(_speedup(sp, colours))
    hist = [r for r in rows if r.histogram]
    if hist:
        out.append(_histograms(hist, colours))
    return out


def _vs_k(rows: Sequence[Row]) -> list[Figure]:
    """AL and tok/s against k, one line per method (and cell for tok/s)."""
    pts: dict[str, list[tuple[int, Row]]] = defaultdict(list)
    for r in rows:
        mk = _method_k(r.config)
        if mk and r.status != "failed":
            pts[mk[0]].append((mk[1], r))
    if not any(len({k for k, _ in v}) > 1 for v in pts.values()):
        return []
    fig, axes = new_figure(6.0, 3.6, ncols=2)
    ax_al, ax_tok = axes[0]
    for n, (method, items) in enumerate(sorted(pts.items())):
        colour = COLOURS[n % len(COLOURS)]
        by_k: dict[int, list[AcceptanceProfile]] = defaultdict(list)
        for k, r in items:
            if r.profile is not None:
                by_k[k].append(r.profile)
        ks = sorted(by_k)
        ax_al.plot(ks, [sum_profiles(by_k[k]).mean_acceptance_length or 0 for k in ks],
                   marker="o", color=colour, label=method)
        cells = sorted({r.cell for _, r in items})
        for j, cell in enumerate(cells):
            cell_items = sorted((k, r) for k, r in items if r.cell == cell and r.tok_s)
            if not cell_items:
                continue
            xs = [k for k, _ in cell_items]
            ys = [r.tok_s.value for _, r in cell_items]  # type: ignore[union-attr]
            lo = [r.tok_s.value - r.tok_s.low for _, r in cell_items]  # type: ignore[union-attr]
            hi = [r.tok_s.high - r.tok_s.value for _, r in cell_items]  # type: ignore[union-attr]
            ax_tok.errorbar(xs, ys, yerr=[lo, hi], marker="o", color=colour, capsize=3,
                            linestyle=("-", "--", ":", "-.")[j % 4], label=f"{method} · {cell}")
    base = [r for r in rows if r.role == "baseline" and r.tok_s]
    for j, b in enumerate(base):
        ax_tok.axhline(b.tok_s.value, color="#555555", linewidth=1,  # type: ignore[union-attr]
                       linestyle=("-", "--", ":", "-.")[j % 4], label=f"spec-off · {b.cell}")
    all_k = sorted({k for items in pts.values() for k, _ in items})
    for ax in (ax_al, ax_tok):
        ax.set_xticks(all_k)
    ax_al.set_xlabel("k (draft tokens per step)")
    ax_al.set_ylabel("mean acceptance length")
    ax_al.set_title("acceptance length vs k", loc="left", fontsize=11)
    ax_tok.set_xlabel("k (draft tokens per step)")
    ax_tok.set_ylabel("output tok/s (aggregate)")
    ax_tok.set_title("throughput vs k", loc="left", fontsize=11)
    for ax in (ax_al, ax_tok):
        ax.grid(True, color="#dddddd")
        ax.legend(fontsize=7)
    return [Figure("vs_k", "Acceptance length and tok/s against k", _png(fig))]


def _speedup(rows: Sequence[Row], colours: dict[str, str]) -> Figure:
    cells = sorted({r.cell for r in rows})
    configs = list(dict.fromkeys(r.config for r in rows))
    fig, axes = new_figure(max(6.0, 1.2 * len(cells) * max(1, len(configs)) / 2), 3.8)
    ax = axes[0][0]
    width = 0.8 / len(configs)
    for n, cfg in enumerate(configs):
        xs, ys = [], []
        for i, cell in enumerate(cells):
            r = next((r for r in rows if r.config == cfg and r.cell == cell), None)
            if r is not None and r.speedup is not None:
                xs.append(i + n * width - 0.4 + width / 2)
                ys.append(r.speedup)
        ax.bar(xs, ys, width=width, color=colours[cfg], label=cfg)
    ax.axhline(1.0, color="#333333", linewidth=1)
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels(cells, rotation=20, fontsize=8)
    ax.set_ylabel("speedup vs spec-off (tok/s ratio)")
    ax.set_title("speedup against the speculation-off baseline", loc="left", fontsize=11)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", color="#dddddd")
    return Figure("speedup", "Speedup against the spec-off baseline", _png(fig))


def _histograms(rows: Sequence[Row], colours: dict[str, str]) -> Figure:
    configs = list(dict.fromkeys(r.config for r in rows))
    fig, axes = new_figure(6.4, 3.6)
    ax = axes[0][0]
    width = 0.8 / len(configs)
    for n, cfg in enumerate(configs):
        hs = [r.histogram for r in rows if r.config == cfg and r.histogram]
        size = max(len(h) for h in hs)
        tot = [sum(h[j] for h in hs if j < len(h)) for j in range(size)]
        steps = sum(tot) or 1
        ax.bar([j + n * width - 0.4 + width / 2 for j in range(size)], [t / steps for t in tot],
               width=width, color=colours[cfg], label=cfg)
    ax.set_xticks(range(max(len(r.histogram or []) for r in rows)))
    ax.set_xlabel("drafts accepted in one verify step")
    ax.set_ylabel("share of verify steps")
    ax.set_title("accepted drafts per step (per-request metrics)", loc="left", fontsize=11)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", color="#dddddd")
    return Figure("accepted_per_step", "Accepted drafts per verify step", _png(fig))


# ---- text ---------------------------------------------------------------------------------

def _commands(run: Run, cells: Sequence[Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(label, exact command, env) of every configuration, as it was launched."""
    seen: dict[str, tuple[str, str, dict[str, str]]] = {}
    for c in cells:
        cmd = c.result.get("command")
        if cmd and c.config not in seen:
            seen[c.config] = (c.config, cmd, c.result.get("env") or {})
    for cfg in run.configs:
        if cfg["label"] not in seen:
            cmd = cfg.get("command") or f"(running server at {cfg.get('url')})"
            seen[cfg["label"]] = (cfg["label"], cmd, (cfg.get("spec") or {}).get("env") or {})
    return list(seen.values())


@dataclass
class Content:
    title: str
    meta: list[str]
    head: list[str]
    body: list[list[str]]
    verdicts: list[Winner]
    commands: list[tuple[str, str, dict[str, str]]]
    problems: list[str]
    notes: list[str]
    figures: list[Figure]


def content(run: Run, run_id: int, cells: Sequence[Any]) -> Content:
    """The report of run ``run_id`` from its cells (the store's ``CellRow``s)."""
    if not cells:
        raise InputError(f"benchmark run {run_id} has no recorded cells yet",
                         f"finish it with: specdoctor {run.kind} --resume {run_id}")
    rows = summary.rows(cells, run.configs)
    m = run.params.get("matrix", {})
    meta = [(f"{run.kind} run {run_id}, started "
            f"{dt.datetime.fromtimestamp(run.created_at, dt.UTC):%Y-%m-%d %H:%M} UTC, "
            f"status {run.status}"),
            (f"{m.get('num_prompts')} requests per cell after one warm-up, max_tokens "
            f"{m.get('max_tokens')}, endpoint /v1/{'chat/' if m.get('endpoint') == 'chat' else ''}"
            f"completions, repeats {run.params.get('repeat', 1)} (configurations interleaved)"),
            (f"sampling: greedy = temperature 0; official = temperature "
            f"{m.get('official_temperature')}, top_p {m.get('official_top_p')}; seeds base "
            f"{m.get('seed')} + request index")]
    head, body = table(rows)
    problems = [f"{where}: {err}" for where, err in grouped_errors(rows)]
    notes = sorted({f"{r.config} {r.cell}: {n}" for r in rows for n in r.notes})
    return Content(f"specdoctor {run.kind} run {run_id}", meta, head, body,
                   summary.verdicts(rows) if len({r.config for r in rows}) > 1 else [],
                   _commands(run, cells), problems, notes, figures(rows))


def markdown(c: Content) -> str:
    lines = [f"# {c.title}", ""] + [f"- {m}" for m in c.meta] + [""]
    if c.verdicts:
        lines += ["## Verdicts", ""]
        for v in c.verdicts:
            lines.append(f"- **{v.cell}**: best `{v.winner}` ({v.tok_s:.1f} tok/s"
                         + (f", {v.speedup:.2f}× spec-off" if v.speedup else "") + ")")
            lines += [f"  - {s}" for s in v.sentences]
            if v.command:
                lines.append(f"  - command: `{v.command}`")
        lines.append("")
    lines += ["## Cells", "", "| " + " | ".join(c.head) + " |",
              "|" + "|".join("---" for _ in c.head) + "|"]
    lines += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in c.body]
    lines += ["", ("AL: mean acceptance length, bonus token counted (vLLM's convention). Spread: "
              "min–max over repeats, or the 95% interval from requests with one run; a speedup "
              "within the spreads is marked not significant."), ""]
    for f in c.figures:
        lines += [f"## {f.title}", "", f"![{f.title}]({f.name}.png)", ""]
    if c.problems:
        lines += ["## Failures", ""] + [f"- {p}" for p in c.problems] + [""]
    if c.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in c.notes] + [""]
    lines += ["## Exact commands", ""]
    for label, cmd, _ in c.commands:
        lines += [f"**{label}**", "", "```sh", cmd, "```", ""]
    return "\n".join(lines)


CSS = "td{text-align:right}td:nth-child(-n+3){text-align:left}"  # numbers right, labels left


def html_page(c: Content) -> str:
    e = html.escape
    parts = ["<ul>"] + [f"<li>{e(m)}</li>" for m in c.meta] + ["</ul>"]
    if c.verdicts:
        parts.append("<h2>Verdicts</h2><ul>")
        for v in c.verdicts:
            parts.append(f"<li><b>{e(v.cell)}</b>: best <code>{e(v.winner)}</code> "
                         f"({v.tok_s:.1f} tok/s" + (f", {v.speedup:.2f}× spec-off" if v.speedup else "")
                         + ")<ul>" + "".join(f"<li>{e(s)}</li>" for s in v.sentences)
                         + (f"<li>command: <code>{e(v.command)}</code></li>" if v.command else "")
                         + "</ul></li>")
        parts.append("</ul>")
    parts.append("<h2>Cells</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in c.head) + "</tr>")
    for row in c.body:
        cls = " class='failed'" if row[2] != "ok" else ""
        parts.append(f"<tr{cls}>" + "".join(f"<td>{e(x)}</td>" for x in row) + "</tr>")
    parts.append("</table>")
    for f in c.figures:
        data = base64.b64encode(f.png).decode()
        parts.append(f"<h2>{e(f.title)}</h2><img id='{f.name}' alt='{e(f.title)}' "
                     f"src='data:image/png;base64,{data}'>")
    if c.problems:
        parts.append("<h2>Failures</h2><ul>" + "".join(f"<li><pre>{e(p)}</pre></li>" for p in c.problems)
                     + "</ul>")
    if c.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in c.notes) + "</ul>")
    parts.append("<h2>Exact commands</h2>")
    for label, cmd, _ in c.commands:
        parts.append(f"<h3>{e(label)}</h3><pre>{e(cmd)}</pre>")
    return page(c.title, parts, CSS)


def write_report(run: Run, run_id: int, cells: Sequence[Any], out_dir: Path
                 ) -> dict[str, Path]:
    """Write report.md (+ figure PNGs) and report.html into ``out_dir``; returns the paths."""
    c = content(run, run_id, cells)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for f in c.figures:  # never through a link already in the folder (report.files)
            write_file(out_dir / f"{f.name}.png", f.png)
        md = write_file(out_dir / "report.md", markdown(c))
        page = write_file(out_dir / "report.html", html_page(c))
    except OSError as exc:
        raise InputError(f"cannot write the report into {out_dir}: {exc.strerror}",
                         "pass --out to a writable folder") from exc
    return {"markdown": md, "html": page}
