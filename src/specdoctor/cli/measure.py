"""`specdoctor measure`: the measurement protocol against a server (default: the lab)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specdoctor.bench import measure as proto
from specdoctor.bench.prompts import SUITES
from specdoctor.report.console import err_console, progress_waiter
from specdoctor.report.plot import write_plot
from specdoctor.report.table import print_notes, profile_table
from specdoctor.cli.options import (
    TEMPERATURE, TOP_P, example, json_option, plot_option, record, store_options,
)


D = proto.MeasureParams()  # the defaults shown here are the protocol's


@click.command(epilog=example(
    "specdoctor measure --url http://127.0.0.1:8000 -n 16 --temperature 1.0 --top-p 0.95"))
@click.option("--url", default=None, help="Server base URL, e.g. http://127.0.0.1:8000. "
              "Default: the lab (started if none is running).")
@click.option("--model", default=D.model,
              help="Model name to request (default: the first one the server lists).")
@click.option("--num-prompts", "-n", type=int, default=D.num_prompts, show_default=True)
@click.option("--concurrency", "-c", type=int, default=D.concurrency, show_default=True)
@click.option("--max-tokens", type=int, default=D.max_tokens, show_default=True)
@click.option("--suite", type=click.Choice(sorted(SUITES)), default=D.suite, show_default=True)
@click.option("--temperature", type=TEMPERATURE, default=D.temperature, show_default=True,
              help="0 is greedy: acceptance is then a fixed function of the prompts.")
@click.option("--top-p", type=TOP_P, default=D.top_p, show_default=True)
@click.option("--seed", type=int, default=D.seed, show_default=True,
              help="Base sampling seed: request i is sent seed + i (independent requests, a "
                   "repeatable run).")
@click.option("--per-request", type=click.Choice(proto.PER_REQUEST_SOURCES),
              default=D.per_request, show_default=True,
              help="Source of per-request counters for the intervals: the responses' own metrics "
                   "(vLLM --per-request-spec-decode-metrics), a /metrics scrape after each "
                   "request (concurrency 1 only), or auto (responses if present, else scrapes).")
@store_options
@plot_option
@json_option
def measure(url: str | None, model: str | None, num_prompts: int, concurrency: int,
            max_tokens: int, suite: str, temperature: float, top_p: float, seed: int,
            per_request: str, db: Path | None, no_store: bool, plot: Path | None,
            as_json: bool) -> None:
    """One warm-up request, then N fixed prompts (greedy unless --temperature) at concurrency C;
    /metrics is scraped before and after so the figures cover this run only. Prints the
    acceptance profile with 95% intervals (per-request bootstrap) and the output tokens/s.
    """
    params = proto.MeasureParams(num_prompts=num_prompts, concurrency=concurrency,
                                 max_tokens=max_tokens, suite=suite, model=model,
                                 temperature=temperature, top_p=top_p, seed=seed,
                                 per_request=per_request)
    params.check()  # before starting a lab server for it
    launch_spec = None
    if url is None:
        from specdoctor.lab import lab as labmod

        with progress_waiter("finding or starting the lab server") as tick:
            handle = labmod.ensure_up(on_tick=tick)
        url, launch_spec = handle.spec.url, handle.spec.to_json()
    console = err_console()
    with Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("requests", total=params.num_prompts)
        m = proto.measure(url, params, on_request=lambda n: bar.update(task, completed=n))
    result = m.to_json()
    run_id = record(db, no_store, **m.store_run(launch_spec))
    if run_id is not None:
        result["run_id"] = run_id
    if plot is not None and m.total is not None:
        write_plot(plot, {"measured": m.total}, f"{m.url} · {m.model} · {len(m.requests)} requests")
    _print(m, result, as_json)
    if m.error:
        raise SystemExit(3)


def _print(m: proto.Measurement, result: dict[str, object], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result))
        return
    out = Console()
    if m.total is not None:
        out.print(profile_table(m.total, f"{m.url} · {m.model} · {len(m.requests)} requests",
                                engine=m.engine))
    tok_s = m.output_tok_s
    out.print(f"output: {m.output_tokens} tokens in {m.wall_s:.1f} s = "
              f"{tok_s:.1f} tok/s" if tok_s else "output: none")
    if m.warmup is not None:
        out.print(f"warm-up (kept apart): {m.warmup.drafts} drafts, {m.warmup.accepted_tokens} accepted")
    print_notes(err_console(), m.notes)  # notes on stderr, as every command's
    if m.error:
        out.print(f"[red]error:[/red] {m.error}")
