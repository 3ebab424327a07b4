"""`specdoctor ledger show ID` / `ledger list`: investigations recorded by `diagnose`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from specdoctor.store.ledger import Investigation, open_ledger_store

_DB = click.option("--db", type=click.Path(path_type=Path), default=None,
                   help="SQLite store (default $SPECDOCTOR_DB or ~/.cache/specdoctor/specdoctor.db).")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")


@click.group()
def ledger() -> None:
    """Hypothesis ledgers of past diagnoses: candidates, costs, verdicts with evidence."""


@ledger.command("list")
@_DB
@click.option("--limit", type=int, default=20, show_default=True)
@_JSON
def list_(db: Path | None, limit: int, as_json: bool) -> None:
    """The latest investigations."""
    store = open_ledger_store(db)
    try:
        invs = store.list(limit)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"investigations": [_summary(i) for i in invs]}))
        return
    t = Table(header_style="bold")
    for col in ("id", "when", "status", "signature", "root cause", "target"):
        t.add_column(col)
    for i in invs:
        s = _summary(i)
        t.add_row(str(i.id), time.strftime("%Y-%m-%d %H:%M", time.localtime(i.created_at)),
                  i.status, s["signature"] or "—", s["root_cause"] or "—", i.target[:60])
    Console().print(t)


@ledger.command("show")
@click.argument("investigation_id", type=int)
@_DB
@_JSON
def show(investigation_id: int, db: Path | None, as_json: bool) -> None:
    """One investigation's signature and ledger, in verdict-cost order."""
    store = open_ledger_store(db)
    try:
        inv = store.get(investigation_id)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({**_summary(inv), "signature": inv.signature, "ledger": inv.ledger,
                               "experiments": inv.experiments}))
        return
    out = Console()
    sig = inv.signature or {}
    out.print(f"[bold]investigation {inv.id}[/bold] ({inv.status}) · {inv.target}")
    out.print(f"signature: [bold]{sig.get('class', '—')}[/bold] — {sig.get('evidence', '')}")
    t = Table(header_style="bold")
    for col in ("hypothesis", "experiment", "cost (cpu/gpu min, restarts)", "verdict", "evidence"):
        t.add_column(col)
    for e in inv.ledger:
        c = e["cost"]
        t.add_row(e["id"], e["experiment"], f"{c['cpu_min']:g}/{c['gpu_min']:g}, {c['restarts']}",
                  e["verdict"], (e["evidence"][-1] if e["evidence"] else "")[:160])
    out.print(t)
    s = _summary(inv)
    out.print(f"root cause: [bold]{s['root_cause'] or 'none'}[/bold]"
              + (f" (also: {', '.join(s['other_causes'])})" if s["other_causes"] else ""))


def _summary(inv: Investigation) -> dict[str, object]:
    res = inv.result or {}
    return {"id": inv.id, "status": inv.status, "target": inv.target,
            "created_at": inv.created_at,
            "signature": (inv.signature or {}).get("class"),
            "root_cause": res.get("root_cause"), "other_causes": res.get("other_causes") or [],
            "report": res.get("report")}
