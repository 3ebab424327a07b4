"""`specdoctor logs FILE...`: acceptance windows from engine logs, and their aggregate."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import click

from specdoctor.cli.options import example, json_option, plot_option, record, store_options
from specdoctor.sources.base import DRAFTERS, LAST_WINDOWS, ReadOptions
from specdoctor.sources.registry import ENGINES


@click.command(epilog=example(
    "specdoctor logs server.log server.1.log --windows 5"))
@click.argument("files", nargs=-1)
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Engine that wrote the logs (default: detected from the metrics lines).")
@click.option("--drafter", type=click.Choice(DRAFTERS), default=ReadOptions.drafter,
              show_default=True,
              help="vLLM only: whether drafts have a fixed length k (draft_model, EAGLE, MTP, "
                   "DFlash) or vary (ngram). Decides the draft count of windows that accepted "
                   "nothing; auto reads the method from each log's start-up lines.")
@click.option("--by-file", is_flag=True,
              help="Report each file apart (needed when the servers' speculative configs "
                   "differ: method or k).")
@click.option("--windows", "show_windows", type=click.IntRange(min=0), default=LAST_WINDOWS,
              show_default=True,
              help="How many of the last windows the table shows (0: none).")
@store_options
@plot_option
@json_option
def logs(files: tuple[str, ...], engine: str | None, drafter: str, by_file: bool,
         show_windows: int, db: Path | None, no_store: bool, plot: Path | None,
         as_json: bool) -> None:
    """Read the speculative-decoding metrics lines of one or more logs: files, or - for stdin
    (docker logs c 2>&1 | specdoctor logs -), or a pipe such as <(kubectl logs pod). Each
    file is read on its own (its own method and k) and its windows are labelled with it; the
    total adds the windows' counts — never averages their averages — and does not depend on
    the order of the files. Malformed metrics lines are skipped and counted.
    """
    # imported here, not at the top: `logs --help` and the command list stay fast
    from rich.console import Console
    from rich.markup import escape

    from specdoctor.report.console import err_console
    from specdoctor.report.table import print_notes, profile_table, windows_table
    from specdoctor.sources.logs import read_logs

    console = err_console()
    with console.status(f"reading {len(files)} log file(s)…") if console.is_terminal else nullcontext():
        res = read_logs(list(files), engine, drafter, keep_windows=as_json or plot is not None,
                        last_windows=min(show_windows, sys.maxsize),  # 10**30: all of them
                        by_file=by_file)
    r = res.reading
    summary = {"engine": r.engine, "total": res.total.to_json(), "window_count": res.window_count,
               "skipped_lines": r.skipped.to_json(), "notes": r.notes,
               "files": [f.to_json() for f in res.files]}
    # The store keeps the total and counts, not every window: re-read the files for those.
    run_id = record(db, no_store, kind="logs", engine=r.engine,
                    target=" ".join(files), params={"drafter": drafter, "by_file": by_file},
                    result=summary, profile=res.total.to_json())
    if plot is not None:
        from specdoctor.report.plot import write_plot  # only when asked: keeps start-up short

        parts = ({f.source: f for f in res.files if f.window_count} if by_file
                 else {"log windows": None})
        curves = {name: _curve(f.total if f else res.total,
                               [w for w in r.windows if f is None or _in(f, w)])
                  for name, f in parts.items()}
        write_plot(plot, curves, f"{r.engine} · {res.window_count} windows")
    if as_json:
        click.echo(json.dumps({**summary, "windows": [w.to_json() for w in r.windows],
                               "run_id": run_id}))
        return
    out, err = Console(), err_console()
    if res.last_windows and show_windows > 0:
        out.print(windows_table(res.last_windows, res.window_count, show_windows))
    if by_file:
        for f in res.files:
            out.print(profile_table(f.total, f"{f.source} · {f.reading.method or 'method ?'} · "
                                             f"k={f.k} · {f.window_count} windows",
                                    engine=f.reading.engine))
    else:
        out.print(profile_table(res.total, f"{r.engine} · total of {res.window_count} windows",
                                engine=r.engine))
    # notes and skipped lines on stderr, as every command's (stdout: the tables)
    if r.skipped.count:
        err.print(f"[yellow]skipped {r.skipped.count} malformed metrics line(s):[/yellow] "
                  + escape("; ".join(r.skipped.examples)), highlight=False)
    unavailable = [res.total.intervals_unavailable] if res.total.intervals_unavailable else []
    print_notes(err, r.notes + list(res.total.notes) + unavailable)


def _in(f: Any, w: Any) -> bool:
    """Whether a window belongs to a file's (or a part's) reading."""
    return w.source == f.input and (f.lines is None or f.lines[0] <= w.line <= f.lines[1])


def _curve(total: Any, windows: list[Any]) -> Any:
    """What --plot draws of a total: its per-position rates where its counts give them; else,
    where the windows printed rates (vLLM windows whose draft count the printed figures do not
    pin down), those rates weighted by each window's drafts (the middle of its range), with the
    lowest and highest any window printed as the band; else the total (the plot says none)."""
    from specdoctor.report.plot import RateCurve

    if total.per_position or not windows:
        return total
    rows: list[tuple[float, list[float]]] = []
    for w in windows:
        rates = w.printed.get("per_position") if isinstance(w.printed, dict) else None
        bounds = w.profile.drafts_bounds
        if not isinstance(rates, list) or bounds is None or "nan" in rates:
            continue
        rows.append(((bounds[0] + bounds[1]) / 2, [float(x) for x in rates]))
    k = max((len(x) for _, x in rows), default=0)
    rows = [(d, x) for d, x in rows if len(x) == k and d > 0]
    if not rows:
        return total
    weight = sum(d for d, _ in rows)
    rates = tuple(sum(d * x[i] for d, x in rows) / weight for i in range(k))
    return RateCurve(rates, tuple(min(x[i] for _, x in rows) for i in range(k)),
                     tuple(max(x[i] for _, x in rows) for i in range(k)),
                     "printed rates: the draft count is not printed")
