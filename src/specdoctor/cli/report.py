"""`specdoctor report RUN_ID`: the Markdown + self-contained HTML report of a bench or sweep run
(also written automatically at the end of each)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from specdoctor.cli.options import db_option, example, json_option, out_option


@click.command(epilog=example(
    "specdoctor report --list && specdoctor report 4 -o reports/sweep-4"))
@click.argument("run_id", type=int, required=False)
@out_option("Folder for report.md, its figures and report.html "
            "(default: reports/bench-RUN_ID next to the store).", default=None)
@click.option("--list", "list_runs", is_flag=True, help="List the recorded bench and sweep runs.")
@db_option
@json_option
def report(run_id: int | None, out_dir: Path | None, list_runs: bool, db: Path | None,
           as_json: bool) -> None:
    """Write the report of a benchmark run: the labelled table, verdicts, per-position curves
    with intervals, acceptance length and tok/s against k, speedup against the spec-off
    baseline, and the exact command of every configuration.
    """
    from specdoctor.errors import InputError
    from specdoctor.store.bench import open_bench_store

    store = open_bench_store(db)
    try:
        if list_runs or run_id is None:
            runs = store.runs()
            if run_id is None and not list_runs:
                raise InputError("which run? pass RUN_ID",
                                 "list them with: specdoctor report --list")
            rows = [{"id": r.id, "kind": r.kind, "status": r.status,
                     "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at)),
                     "configs": [c["label"] for c in r.configs]} for r in runs]
            if as_json:
                click.echo(json.dumps({"runs": rows}))
            else:
                from specdoctor.safe_text import visible

                for r in rows:  # run labels come from the user's files: shown, never sent
                    click.echo(f"{r['id']:>4}  {r['created']}  {r['kind']:<5}  {r['status']:<8}  "
                               + visible(", ".join(r["configs"])))
            return
        from specdoctor.report.bench import write_report

        out = out_dir or Path(store.path).parent / "reports" / f"bench-{run_id}"
        paths = write_report(store.run(run_id), run_id, store.cells(run_id), out)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"run_id": run_id, **{k: str(v) for k, v in paths.items()}}))
    else:
        for k, v in paths.items():
            click.echo(f"{k}: {v}")
