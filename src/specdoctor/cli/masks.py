"""`specdoctor masks diff|show`: attention masks per backend, from the engine's code, bit by bit.

    specdoctor masks diff --impl fa2,flex --window 4 --causal false --ctx 0..16 --q 8
    specdoctor masks diff --code snap-028 --convention 'fa2=W,symmetric,<=' --check
    specdoctor masks show --impl fa2,sdpa --window 4 --causal true --ctx 6 --q 4
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specdoctor.cli.options import example, json_option, list_option
from specdoctor.errors import InputError
from specdoctor.experiments.masks.backends import BACKENDS, Resolved, parse_convention, resolve
from specdoctor.experiments.masks.cite import CodeRoot
from specdoctor.experiments.masks.diff import CTX, QUERIES, MaskDiff, check_size, diff_masks
from specdoctor.experiments.masks.model import MaskSpec, mask_rows, render
from specdoctor.report.console import err_console


def _ctx_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?:\.\.\s*(\d+))?\s*", text)
    if not m:
        raise InputError(f"cannot read --ctx {text!r}", "write A..B (inclusive) or one number")
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    if hi < lo:
        raise InputError(f"--ctx {text}: the range runs backwards", "write A..B with A <= B")
    return lo, hi


def _models(impls: tuple[str, ...], window: int | None, causal: bool, code: Path | None,
            conventions: tuple[str, ...]) -> tuple[MaskSpec, list[Resolved], CodeRoot]:
    if window is not None and window < 1:
        raise InputError("--window must be >= 1", "omit it for full attention")
    spec = MaskSpec(window, causal)
    root = CodeRoot(code)
    overrides = dict(parse_convention(c) for c in conventions)
    names = list(impls)
    if len(names) != len(set(names)):
        raise InputError("an implementation is named twice in --impl", "list each once")
    return spec, [resolve(i, spec, root, overrides.get(i)) for i in names], root


_common = [
    list_option("--impl", "impls", default=tuple(BACKENDS),
                show_default=",".join(BACKENDS), help="The backends to model."),
    click.option("--window", type=int, default=None, help="The model's sliding window W (omit: full)."),
    click.option("--causal", type=click.BOOL, default=False, show_default=True),
    click.option("--q", "n", type=int, default=QUERIES, show_default=True,
                 help="Query tokens per step."),
    click.option("--code", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
                 help="A recon snapshot or site-packages to read the engine code from "
                      "(default: the installed packages)."),
    click.option("--convention", "conventions", multiple=True,
                 help="Override: IMPL=W|W-1,one-sided|symmetric|left-only,<|<=[,bottom-right|top-left]; "
                      "repeat the flag for more (one convention holds commas)."),
    json_option,
]


def common(f: Any) -> Any:
    for opt in reversed(_common):
        f = opt(f)
    return f


@click.group(epilog=example(
    "specdoctor masks diff --impl fa2,flex --window 4 --causal false --ctx 0..16"))
def masks() -> None:
    """Model the mask each attention backend applies and diff them bit by bit.
    """


@masks.command(epilog=example(
    "specdoctor masks diff --code snap-028 --convention 'fa2=W,symmetric,<=' --check"))
@common
@click.option("--ctx", "ctx", default=f"{CTX[0]}..{CTX[1]}", show_default=True,
              help="Context lengths A..B.")
@click.option("--check", is_flag=True,
              help="Also run the real ops that work here (flex, sdpa, cpu) and compare bits.")
def diff(impls: tuple[str, ...], window: int | None, causal: bool, n: int, code: Path | None,
         conventions: tuple[str, ...], as_json: bool, ctx: str, check: bool) -> None:
    """Where the masks of the backends differ, for queries ctx+i over keys [0, ctx+q).
    """
    lo, hi = _ctx_range(ctx)
    check_size(lo, hi, n)  # before the code is read
    spec, models, root = _models(impls, window, causal, code, conventions)
    result = diff_masks(models, spec, lo, hi, n)
    checks = []
    if check:
        from specdoctor.experiments.masks.check import check_ctxs, run_checks

        with err_console().status("running the real attention ops (imports torch and vllm)"):
            checks = run_checks(models, spec, check_ctxs(spec, lo, hi, n), n)
    if as_json:
        click.echo(json.dumps(_json(result, root, checks), indent=1))
        return
    _print(result, root, checks)


@masks.command(epilog=example(
    "specdoctor masks show --impl fa2,sdpa --window 4 --causal true --ctx 6 --q 4"))
@common
@click.option("--ctx", "ctx", type=int, default=CTX[0], show_default=True,
              help="One context length.")
def show(impls: tuple[str, ...], window: int | None, causal: bool, n: int, code: Path | None,
         conventions: tuple[str, ...], as_json: bool, ctx: int) -> None:
    """Print each backend's mask for one context length: 1 visible, . masked.
    """
    check_size(ctx, ctx, n)
    spec, models, _ = _models(impls, window, causal, code, conventions)
    rows = {m.impl: render(mask_rows(m.convention, spec, ctx, n)) for m in models}
    if as_json:
        click.echo(json.dumps({"ctx": ctx, "q": n, "spec": asdict(spec), "rows": rows}, indent=1))
        return
    con = Console()
    for m in models:
        con.print(f"[bold]{m.impl}[/bold]  {m.convention.describe()}", highlight=False)
        for i, row in enumerate(rows[m.impl]):
            con.print(f"  q={ctx + i:>5}  {row}", highlight=False, markup=False)


def fallbacks(models: list[Resolved], root: CodeRoot) -> dict[str, list[str]]:
    """Files that --code DIR did not hold and that were read from the installed packages
    instead, grouped by installed distribution ("torch 2.13.0": [paths]). Empty without --code."""
    if root.root is None:
        return {}
    from importlib.metadata import packages_distributions, version

    dists = packages_distributions()
    out: dict[str, list[str]] = {}
    for m in models:
        for c in m.citations:
            if c.origin != "installed":
                continue
            top = c.path.split("/", 1)[0]
            names = dists.get(top) or [top]
            key = ", ".join(f"{n} {version(n)}" if n in dists.get(top, []) else n for n in names)
            if c.path not in out.setdefault(key, []):
                out[key].append(c.path)
    return out


def fallback_line(fb: dict[str, list[str]]) -> str:
    return "; ".join(f"{dist}: {', '.join(p.rsplit('/', 1)[-1] for p in paths)}"
                     for dist, paths in fb.items())


def _json(d: MaskDiff, root: CodeRoot, checks: list[Any]) -> dict[str, Any]:
    return {
        "spec": asdict(d.spec), "ctx": list(d.ctx), "q": d.n, "code": root.label(),
        "read_from_installed_instead": fallbacks(d.models, root),
        "identical": d.identical, "groups": d.groups,
        "models": [{"impl": m.impl, "convention": asdict(m.convention), "notes": m.notes,
                    "citations": [asdict(c) | {"found": c.found} for c in m.citations]}
                   for m in d.models],
        "differences": [{"a": p.a, "b": p.b, "cells": p.cells, "ctx_range": p.ctx_seen,
                         "distances": {str(k): v for k, v in sorted(p.distances.items())},
                         "summary": p.summary(d.spec), "listed": [asdict(c) for c in p.listed]}
                        for p in d.pairs],
        "checks": [asdict(c) | {"ok": c.ok} for c in checks],
    }


def _print(d: MaskDiff, root: CodeRoot, checks: list[Any]) -> None:
    con = Console()
    w = f"W={d.spec.window}" if d.spec.window is not None else "no window"
    con.print(f"masks: {w}, {'causal' if d.spec.causal else 'non-causal'}, ctx {d.ctx[0]}..{d.ctx[1]}, "
              f"q={d.n}; code from {escape(root.label())}", highlight=False)
    fb = fallbacks(d.models, root)
    if fb:
        con.print(f"[red]not in {escape(str(root.root))}, read from the installed packages "
                  f"instead[/red]: {escape(fallback_line(fb))}", highlight=False)
    table = Table(title_justify="left")
    for col in ("impl", "convention", "transcribes (file:line @ sha256)"):
        table.add_column(col)
    for m in d.models:
        cites = "\n".join(escape(c.short(brief=True))
                          + (" [red](installed)[/red]" if root.root and c.origin == "installed"
                             else "") for c in m.citations)
        notes = "".join(f"\n[yellow]{escape(x)}[/yellow]" for x in m.notes)
        table.add_row(m.impl, m.convention.describe(), cites + notes)
    con.print(table)
    if d.identical:
        con.print(f"[green]identical[/green]: {' = '.join(d.groups[0])} agree on every bit "
                  f"for ctx {d.ctx[0]}..{d.ctx[1]}")
    else:
        con.print("[red]differ[/red]: " + " | ".join(" = ".join(g) for g in d.groups))
        for p in d.pairs:
            con.print(f"{'='.join(p.a)} vs {'='.join(p.b)}: {p.summary(d.spec)}", highlight=False)
            cells = Table(show_header=True)
            for col in ("ctx", "q", "k", "q-k", "=".join(p.a), "=".join(p.b)):
                cells.add_column(col, justify="right")
            for c in p.listed[:16]:
                cells.add_row(str(c.ctx), str(c.q), str(c.k), str(c.q - c.k),
                              "sees" if c.a else "masked", "sees" if c.b else "masked")
            con.print(cells)
    for c in checks:
        if not c.ran:
            con.print(f"check {c.impl}: {c.how}", style="dim")
            continue
        if c.ok:
            con.print(f"[green]check {c.impl}: model = op[/green] on {c.cells} cells "
                      f"(ctx {', '.join(map(str, c.ctxs))}; {c.how}; {escape(c.code)})", highlight=False)
        else:
            con.print(f"[red]check {c.impl}: model != op[/red] at {len(c.mismatches)}+ cells, "
                      f"first {c.mismatches[0]}", highlight=False)
        if c.cited_code_differs:
            con.print(f"[yellow]  the check ran the installed {c.impl} code, not the cited file: "
                      "it confirms the op, not that version's source[/yellow]")
