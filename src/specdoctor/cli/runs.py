"""`specdoctor runs [ID]`: what the store holds, as tables (or one JSON object with --json)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specdoctor.acceptance.profile import AcceptanceProfile, Interval
from specdoctor.report.table import print_notes, profile_table, source_names
from specdoctor.cli.options import db_option, db_words, example, json_option
from specdoctor.store.db import LIST_LIMIT, RunRow, open_store


@click.command(epilog=example(
    "specdoctor runs 7 --json"))
@click.argument("run_id", type=int, required=False)
@db_option
@click.option("--limit", type=click.IntRange(min=1), default=LIST_LIMIT, show_default=True,
              help="How many of the latest runs to list.")
@json_option
def runs(run_id: int | None, db: Path | None, limit: int, as_json: bool) -> None:
    """List recorded runs (latest first), or show run ID: what ran, against what, and its
    acceptance profile.
    """
    store = open_store(db)
    try:
        if run_id is not None:
            row = store.run(run_id)
            scrapes = len(store.scrapes(run_id))
            requests = len(store.requests(run_id))
        else:
            rows = store.runs(limit)
    finally:
        store.close()
    if run_id is not None:
        if as_json:
            click.echo(json.dumps({"id": row.id, "kind": row.kind, "engine": row.engine,
                                   "target": row.target, "status": row.status,
                                   "created_at": row.created_at, "error": row.error,
                                   "launch_spec": row.launch_spec, "result": row.result,
                                   "scrapes": scrapes, "requests": requests}))
        else:
            _show(row, scrapes, requests, db)
        return
    if as_json:
        click.echo(json.dumps({"runs": [{"id": r.id, "kind": r.kind, "engine": r.engine,
                                         "target": r.target, "status": r.status,
                                         "created_at": r.created_at,
                                         "total": r.result.get("total")} for r in rows]}))
        return
    if not rows:
        click.echo("no runs recorded yet (measure, logs and metrics record theirs)")
        return
    t = Table(header_style="bold")
    for col in ("id", "when", "kind", "engine"):
        t.add_column(col, no_wrap=True)
    t.add_column("target", overflow="fold")
    t.add_column("status", no_wrap=True)
    t.add_column("mean AL", justify="right", no_wrap=True)
    t.add_column("per position")
    for r in rows:
        tot = r.result.get("total") or {}
        pos = ", ".join(f"{x:.3f}" for x in (tot.get("per_position") or []) if x is not None)
        mal = tot.get("mean_acceptance_length")
        t.add_row(str(r.id), _when(r.created_at), r.kind, r.engine, escape(readable_target(r.target)),
                  r.status, "—" if mal is None else f"{mal:.2f}", pos)
    Console().print(t)
    click.echo(f"show one: specdoctor runs ID{db_words(db)}", err=True)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def readable_target(target: str, width: int = 48) -> str:
    """A URL as it is; log files by their shortest telling names ("a/server.log +2 more")."""
    if "://" in target:
        return target
    parts = target.split(" ")
    names = source_names(parts)
    text = names[parts[0]] + (f" +{len(parts) - 1} more" if len(parts) > 1 else "")
    return text if len(text) <= width else "…" + text[-(width - 1):]


def profile_from_json(d: dict[str, Any]) -> AcceptanceProfile:
    """The stored `total` back as a profile (counts, k, intervals, notes) to print it."""
    counts = d.get("drafts") is not None
    acc = d.get("accepted_per_position")
    return AcceptanceProfile(
        drafts=d.get("drafts"), draft_tokens=d.get("draft_tokens"),
        accepted_tokens=d.get("accepted_tokens"),
        accepted_per_position=tuple(acc) if acc is not None else None, k=d.get("k"),
        reported_mean_acceptance_length=None if counts else d.get("mean_acceptance_length"),
        reported_acceptance_rate=None if counts else d.get("acceptance_rate"),
        count_weighted=d.get("count_weighted", True),
        intervals={n: Interval(lo, hi) for n, (lo, hi) in (d.get("ci95") or {}).items()},
        notes=tuple(d.get("notes") or ()))


def _show(row: RunRow, scrapes: int, requests: int, db: Path | None = None) -> None:
    con = Console()
    t = Table(show_header=False, title=f"run {row.id}", title_justify="left")
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("when", _when(row.created_at))
    t.add_row("kind", row.kind)
    t.add_row("engine", row.engine)
    t.add_row("target", escape(row.target))
    t.add_row("status", row.status if row.status == "ok" else f"[red]{escape(row.status)}[/red]")
    if row.error:
        t.add_row("error", escape(row.error))
    params = row.result.get("params")
    if isinstance(params, dict):
        t.add_row("params", escape(", ".join(f"{k}={v}" for k, v in params.items())))
    if row.launch_spec:
        t.add_row("launched", escape(str(row.launch_spec.get("label") or row.launch_spec)))
    t.add_row("stored", f"{requests} request record(s), {scrapes} scrape(s)")
    con.print(t)
    total = row.result.get("total")
    if isinstance(total, dict):
        con.print(profile_table(profile_from_json(total), f"run {row.id} · {row.kind} · total",
                                engine=row.engine))
        from specdoctor.report.console import err_console

        print_notes(err_console(), list(row.result.get("notes") or [])
                    + list(total.get("notes") or []))
    else:
        con.print("no acceptance figures stored for this run")
    click.echo(f"all of it as JSON: specdoctor runs {row.id}{db_words(db)} --json", err=True)
