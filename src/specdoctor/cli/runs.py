"""`specdoctor runs [ID]`: what the store holds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from specdoctor.store.db import open_store


@click.command()
@click.argument("run_id", type=int, required=False)
@click.option("--db", type=click.Path(path_type=Path), default=None, help="SQLite store to read.")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def runs(run_id: int | None, db: Path | None, limit: int, as_json: bool) -> None:
    """List recorded runs, or show one run's full result."""
    store = open_store(db)
    try:
        if run_id is not None:
            row = store.run(run_id)
            click.echo(json.dumps({"id": row.id, "kind": row.kind, "engine": row.engine,
                                   "target": row.target, "status": row.status, "error": row.error,
                                   "launch_spec": row.launch_spec, "result": row.result,
                                   "scrapes": len(store.scrapes(run_id))},
                                  indent=None if as_json else 2))
            return
        rows = store.runs(limit)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"runs": [{"id": r.id, "kind": r.kind, "target": r.target,
                                         "status": r.status, "created_at": r.created_at,
                                         "total": r.result.get("total")} for r in rows]}))
        return
    t = Table(header_style="bold")
    for col in ("id", "when", "kind", "target", "status", "mean AL", "per position"):
        t.add_column(col)
    for r in rows:
        tot = r.result.get("total") or {}
        pos = ", ".join(f"{x:.3f}" for x in (tot.get("per_position") or []))
        mal = tot.get("mean_acceptance_length")
        t.add_row(str(r.id), time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at)), r.kind,
                  r.target, r.status, "—" if mal is None else f"{mal:.2f}", pos)
    Console().print(t)
