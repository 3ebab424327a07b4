"""`specdoctor logs FILE...`: acceptance windows from engine logs, and their aggregate."""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import IO, Any

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
    # every window goes past once, kept in bounded memory: its JSON spooled to a file, its
    # printed rates folded per part (a 1 GB log holds half a million windows)
    seen = _Windows(as_json, plot is not None)
    with console.status(f"reading {len(files)} log file(s)…") if console.is_terminal else nullcontext():
        res = read_logs(list(files), engine, drafter, keep_windows=False,
                        last_windows=min(show_windows, sys.maxsize),  # 10**30: all of them
                        by_file=by_file, on_window=seen.add)
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
        curves = {name: seen.curve(f.total, (f.part, f.segment)) if f
                  else seen.curve(res.total, None) for name, f in parts.items()}
        write_plot(plot, curves, f"{r.engine} · {res.window_count} windows")
    if as_json:
        seen.write_json(sys.stdout, summary, run_id)
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


class _RateFold:
    """Printed per-position rates of windows of one draft length, folded as they come: their
    sum weighted by each window's drafts (the middle of its range), lowest and highest."""

    def __init__(self, k: int) -> None:
        self.weight = 0.0
        self.sums, self.low, self.high = [0.0] * k, [math.inf] * k, [-math.inf] * k

    def add(self, drafts: float, rates: list[float]) -> None:
        self.weight += drafts
        for i, x in enumerate(rates):
            self.sums[i] += drafts * x
            self.low[i], self.high[i] = min(self.low[i], x), max(self.high[i], x)


class _Windows:
    """What --json and --plot need of every window, taken as the windows stream past: each
    window's JSON in a temporary file (``json_out``), each part's printed rates folded by
    draft length (``plot``). Memory stays flat however long the logs are."""

    def __init__(self, json_out: bool, plot: bool) -> None:
        self.spool = tempfile.TemporaryFile("w+", encoding="utf-8") if json_out else None
        self.count = 0
        self.folds: dict[tuple[int, int], dict[int, _RateFold]] | None = {} if plot else None

    def add(self, part: int, segment: int, w: Any) -> None:
        if self.spool is not None:
            self.spool.write(("," if self.count else "") + json.dumps(w.to_json()))
            self.count += 1
        if self.folds is not None:
            rates = w.printed.get("per_position") if isinstance(w.printed, dict) else None
            bounds = w.profile.drafts_bounds
            if not isinstance(rates, list) or bounds is None or "nan" in rates:
                return
            drafts = (bounds[0] + bounds[1]) / 2
            if drafts <= 0:
                return
            by_k = self.folds.setdefault((part, segment), {})
            by_k.setdefault(len(rates), _RateFold(len(rates))).add(
                drafts, [float(x) for x in rates])

    def curve(self, total: Any, key: tuple[int, int] | None) -> Any:
        """What --plot draws of a total (the whole reading's when ``key`` is None, else one
        part's): its per-position rates where its counts give them; else, where the windows
        printed rates (vLLM windows whose draft count the printed figures do not pin down),
        the longest ones weighted by each window's drafts, with the lowest and highest any
        window printed as the band; else the total (the plot says none)."""
        from specdoctor.report.plot import RateCurve

        assert self.folds is not None
        if total.per_position:
            return total
        folds: dict[int, _RateFold] = {}
        for part_key, by_k in self.folds.items():
            if key is None or part_key == key:
                for k, f in by_k.items():
                    folds.setdefault(k, _RateFold(k))
                    _merge(folds[k], f)
        k = max(folds, default=0)
        if not k or folds[k].weight <= 0:
            return total
        f = folds[k]
        return RateCurve(tuple(x / f.weight for x in f.sums), tuple(f.low), tuple(f.high),
                         "printed rates: the draft count is not printed")

    def write_json(self, out: IO[str], summary: dict[str, Any], run_id: Any) -> None:
        """The reading as one JSON object: the summary's keys, every window, the run id."""
        assert self.spool is not None
        head = json.dumps(summary)
        out.write(head[:-1] + (", " if summary else "") + '"windows": [')
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, out)
        out.write('], "run_id": ' + json.dumps(run_id) + "}\n")
        out.flush()


def _merge(into: _RateFold, f: _RateFold) -> None:
    into.weight += f.weight
    for i in range(len(f.sums)):
        into.sums[i] += f.sums[i]
        into.low[i], into.high[i] = min(into.low[i], f.low[i]), max(into.high[i], f.high[i])
