"""The console face of bench and sweep: progress on stderr while cells run, then one labelled
row per configuration × cell and the verdicts on stdout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from specdoctor.bench.client import Outcome
from specdoctor.bench.matrix import Cell
from specdoctor.bench.runner import Config, Events, Plan
from specdoctor.bench.summary import Row, Winner
from specdoctor.launch.spec import LaunchSpec
from specdoctor.report.bench_rows import grouped_errors, table
from specdoctor.report.console import err_console
from specdoctor.safe_text import markup, visible


class ConsoleEvents(Events):
    """A bar per running cell (requests done of planned) and one line per finished cell."""

    def __init__(self, run_id: int, plan: Plan, quiet: bool = False) -> None:
        self.console = err_console()
        self.quiet = quiet
        total = plan.repeat * len(plan.configs) * len(plan.params.cells())
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, transient=True,
                                 disable=not self.console.is_terminal)
        self.progress.start()
        self.overall = self.progress.add_task(f"run {run_id}: cells", total=total)
        self.tasks: dict[tuple[str, str, int], Any] = {}
        self.last_tick: dict[str, float] = {}
        self._say(f"benchmark run {run_id}: {len(plan.configs)} configuration(s) × "
                  f"{len(plan.params.cells())} cell(s) × {plan.repeat} repeat(s)")

    def _say(self, text: str) -> None:
        if not self.quiet or not self.console.is_terminal:
            self.progress.console.print(visible(text), highlight=False, markup=False)

    def launching(self, config: Config, spec: LaunchSpec) -> None:
        self._say(f"[{config.label}] starting: {spec.shell_command()}")

    def ready_tick(self, config: Config, elapsed: float, line: str) -> None:
        if elapsed - self.last_tick.get(config.label, -60.0) >= 30:
            self.last_tick[config.label] = elapsed
            self._say(f"[{config.label}] waiting for readiness {elapsed:4.0f} s  {line[:90]}")

    def cell_started(self, config: Config, cell: Cell, rep: int, total: int) -> None:
        self.tasks[(config.label, cell.name, rep)] = self.progress.add_task(
            markup(f"{config.label} {cell.name} r{rep}"), total=total)

    def request_done(self, config: Config, cell: Cell, rep: int, o: Outcome) -> None:
        t = self.tasks.get((config.label, cell.name, rep))
        if t is not None:
            self.progress.advance(t)

    def cell_done(self, config: Config, cell: Cell, rep: int, result: dict[str, Any]) -> None:
        t = self.tasks.pop((config.label, cell.name, rep), None)
        if t is not None:
            self.progress.remove_task(t)
        self.progress.advance(self.overall)
        if result["status"] == "ok":
            p = result.get("profile") or {}
            al = p.get("mean_acceptance_length")
            self._say(f"[{config.label}] {cell.name} r{rep}: {result.get('tok_s') or 0:.1f} tok/s"
                      + (f", AL {al:.2f}" if al else "")
                      + (f", failures {result['failures']}" if result.get("failures") else ""))
        else:
            first = str(result.get("error")).splitlines()[0]
            self._say(f"[{config.label}] {cell.name} r{rep}: FAILED — {first}")

    def close(self) -> None:
        self.progress.stop()


def rows_table(rows: Sequence[Row], title: str) -> Table:
    t = Table(title=title, header_style="bold", title_justify="left")
    head, body = table(rows)
    for n, col in enumerate(head):
        t.add_column(col, justify="left" if n < 3 or n == len(head) - 1 else "right")
    for line in body:  # labels and cells (dataset categories) come from the user's files
        t.add_row(*(markup(x) for x in line), style=None if line[2] == "ok" else "red")
    t.caption = ("AL: mean acceptance length (bonus token counted); tok/s: aggregate output; "
                 "spread: min–max over repeats or 95% CI from requests; not significant: within "
                 "the spreads of the baseline; latencies are p50")
    return t


def print_rows(run_id: int, kind: str, status: str, rows: Sequence[Row],
               verdicts: Sequence[Winner], report: dict[str, str]) -> None:
    out = Console(width=None if Console().is_terminal else 200)
    out.print(rows_table(rows, f"{kind} run {run_id} ({status})"))
    for where, err in grouped_errors(rows):
        out.print(f"[red]{markup(where)}:[/red] {markup(err, keep_newline=True)}",
                  highlight=False)
    for v in verdicts if len({r.config for r in rows}) > 1 else ():
        out.print(f"[bold]{markup(v.cell)}[/bold]: best {markup(v.winner)} ({v.tok_s:.1f} tok/s"
                  + (f", {v.speedup:.2f}× spec-off" if v.speedup else "") + ")", highlight=False)
        for s in v.sentences:
            out.print(f"  {markup(s)}", highlight=False)
        if v.command:
            out.print(f"  command: {visible(v.command)}", highlight=False, markup=False)
    for kind_, path in report.items():
        out.print(f"report ({kind_}): {path}", highlight=False)
