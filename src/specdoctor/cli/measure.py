"""`specdoctor measure`: the measurement protocol against a server (default: the lab)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specdoctor.bench import measure as proto
from specdoctor.bench.prompts import SUITES, take
from specdoctor.report.console import err_console, progress_waiter
from specdoctor.report.plot import write_plot
from specdoctor.report.table import print_notes, profile_table
from specdoctor.cli.options import plot_option, record, store_options


@click.command()
@click.option("--url", default=None, help="Server base URL, e.g. http://127.0.0.1:8000. "
              "Default: the lab (started if none is running).")
@click.option("--model", default=None, help="Model name to request (default: the first one the server lists).")
@click.option("--num-prompts", "-n", type=int, default=16, show_default=True)
@click.option("--concurrency", "-c", type=int, default=1, show_default=True)
@click.option("--max-tokens", type=int, default=64, show_default=True)
@click.option("--suite", type=click.Choice(sorted(SUITES)), default="code", show_default=True)
@click.option("--temperature", type=float, default=0.0, show_default=True,
              help="0 is greedy: acceptance is then a fixed function of the prompts.")
@click.option("--top-p", type=float, default=1.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True,
              help="Base sampling seed: request i is sent seed + i (independent requests, a "
                   "repeatable run).")
@click.option("--per-request", type=click.Choice(["auto", "response", "scrape"]), default="auto",
              show_default=True,
              help="Source of per-request counters for the intervals: the responses' own metrics "
                   "(vLLM --per-request-spec-decode-metrics), a /metrics scrape after each "
                   "request (concurrency 1 only), or auto (responses if present, else scrapes).")
@store_options
@plot_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def measure(url: str | None, model: str | None = None, num_prompts: int = 16, concurrency: int = 1,
            max_tokens: int = 64, suite: str = "code", temperature: float = 0.0,
            top_p: float = 1.0, seed: int = 0, per_request: str = "auto",
            db: Path | None = None,
            no_store: bool = False, plot: Path | None = None, as_json: bool = False) -> None:
    """One warm-up request, then N fixed prompts (greedy unless --temperature) at concurrency C;
    /metrics is scraped before and after so the figures cover this run only. Prints the
    acceptance profile with 95% intervals (per-request bootstrap) and the output tokens/s."""
    from specdoctor.errors import InputError

    if concurrency < 1 or max_tokens < 1:
        raise InputError("--concurrency and --max-tokens must be at least 1",
                         "e.g. --concurrency 1 --max-tokens 64")
    if temperature < 0 or not 0 < top_p <= 1:
        raise InputError(f"--temperature {temperature} / --top-p {top_p} is out of range",
                         "use --temperature >= 0 and 0 < --top-p <= 1")
    if per_request == "scrape" and concurrency != 1:
        raise InputError("--per-request scrape needs --concurrency 1",
                         "concurrent requests share the counters; use --per-request response")
    prompts = take(suite, num_prompts)
    params = proto.MeasureParams(num_prompts=num_prompts, concurrency=concurrency,
                                 max_tokens=max_tokens, suite=suite, model=model,
                                 temperature=temperature, top_p=top_p, seed=seed,
                                 per_request=per_request)
    launch_spec = None
    if url is None:
        url, launch_spec = _lab_url()
    console = err_console()
    with Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("requests", total=len(prompts))
        m = proto.run(url, prompts, params, on_request=lambda n: bar.update(task, completed=n))
    result = m.to_json()
    run_id = record(
        db, no_store, kind="measure", engine="vllm", target=url, params=params.__dict__,
        result=result, profile=m.total.to_json() if m.total else None,
        status="failed" if m.error else "ok", error=m.error, launch_spec=launch_spec,
        scrapes=[(s.phase, s.taken_at, s.text) for s in m.scrapes],
        requests=[{"index": r.index, "prompt": r.prompt, "completion_tokens": r.completion_tokens,
                   "latency_s": r.latency_s,
                   "profile": r.profile.to_json() if r.profile else None,
                   "per_step": list(r.per_step) if r.per_step else None} for r in m.requests],
    )
    if run_id is not None:
        result["run_id"] = run_id
    if plot is not None and m.total is not None:
        write_plot(plot, {"measured": m.total}, f"{m.url} · {m.model} · {len(m.requests)} requests")
    _print(m, result, as_json)
    if m.error:
        raise SystemExit(3)


def _lab_url() -> tuple[str, dict[str, object]]:
    from specdoctor.lab import lab as labmod

    servers = labmod.running()
    if servers:
        h = servers[0]
    else:
        spec = labmod.lab_spec()
        with progress_waiter(f"no lab server running: starting one ({spec.label})") as tick:
            h = labmod.up(spec, on_tick=tick)
    return h.spec.url, h.spec.to_json()


def _print(m: proto.Measurement, result: dict[str, object], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result))
        return
    out = Console()
    if m.total is not None:
        out.print(profile_table(m.total, f"{m.url} · {m.model} · {len(m.requests)} requests",
                                engine="vllm"))
    tok_s = m.output_tok_s
    out.print(f"output: {m.output_tokens} tokens in {m.wall_s:.1f} s = "
              f"{tok_s:.1f} tok/s" if tok_s else "output: none")
    if m.warmup is not None:
        out.print(f"warm-up (kept apart): {m.warmup.drafts} drafts, {m.warmup.accepted_tokens} accepted")
    print_notes(out, m.notes)
    if m.error:
        out.print(f"[red]error:[/red] {m.error}")
