"""`specdoctor ledger show ID` / `ledger list`: investigations recorded by `diagnose`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specdoctor.cli.options import db_option, example, json_option
from specdoctor.report.table import ledger_table
from specdoctor.store.db import LIST_LIMIT
from specdoctor.store.ledger import Investigation, open_ledger_store

@click.group(epilog=example(
    "specdoctor ledger list && specdoctor ledger show 3"))
def ledger() -> None:
    """Hypothesis ledgers of past diagnoses: candidates, costs, verdicts with evidence.
    """


@ledger.command("list", epilog=example(
    "specdoctor ledger list --limit 5"))
@db_option
@click.option("--limit", type=click.IntRange(min=1), default=LIST_LIMIT, show_default=True,
              help="How many of the latest investigations to list.")
@json_option
def list_(db: Path | None, limit: int, as_json: bool) -> None:
    """The latest investigations.
    """
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
                  i.status, s["signature"] or "—", s["root_cause"] or "—", escape(i.target))
    Console().print(t)


@ledger.command("show", epilog=example(
    "specdoctor ledger show 3 --json"))
@click.argument("investigation_id", type=int)
@db_option
@json_option
def show(investigation_id: int, db: Path | None, as_json: bool) -> None:
    """One investigation's signature and ledger, in verdict-cost order.
    """
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
    out.print(f"signature: [bold]{sig.get('class', '—')}[/bold] — "
              f"{escape(str(sig.get('evidence', '')))}")
    out.print(ledger_table(inv.ledger))
    from specdoctor.diagnose.report import answer_words

    s = _summary(inv)
    res = inv.result or {}
    words = answer_words(s["root_cause"], res.get("root_cause_basis"), res.get("undetermined"),
                         str(sig.get("class", "")), inv.ledger or [])
    out.print(f"root cause: [bold]{escape(words[0])}[/bold]"
              + (f" (also: {', '.join(s['other_causes'])})" if s["other_causes"] else ""))
    for w in words[1:]:
        out.print(w, markup=False)


def _summary(inv: Investigation) -> dict[str, object]:
    res = inv.result or {}
    return {"id": inv.id, "status": inv.status, "target": inv.target,
            "created_at": inv.created_at,
            "signature": (inv.signature or {}).get("class"),
            "root_cause": res.get("root_cause"), "root_cause_basis": res.get("root_cause_basis"),
            "undetermined": res.get("undetermined"),
            "other_causes": res.get("other_causes") or [],
            "report": res.get("report")}
