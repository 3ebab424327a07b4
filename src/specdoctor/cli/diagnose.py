"""`specdoctor diagnose`: why acceptance is low — signature, ledger, verdict experiments, report.

Targets: `--launch 'COMMAND'` (specdoctor starts the server and changes one thing per
experiment), `--url URL` (measure, classify, the oracle and the static experiments, no restart;
`--logs` beside it gives the server's start-up log), `--logs FILE…` (signature and the static
experiments). With none, the embedded lab's launch command is used: this is the only place that
knows the lab; the diagnosis itself never imports it.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from specdoctor.bench.prompts import SUITES
from specdoctor.errors import InputError
from specdoctor.sources.registry import ENGINES


def parse_sampling(values: tuple[str, ...]) -> tuple[bool, tuple[float, float] | None]:
    """``greedy``, ``official`` (T=1.0, top_p=0.95) or ``T,top_p``; at most one sampled."""
    from specdoctor.diagnose.orchestrator import OFFICIAL

    greedy, sampled = False, None
    for v in values or ("greedy", "official"):
        if v == "greedy":
            greedy = True
            continue
        if v == "official":
            pair = OFFICIAL
        else:
            try:
                t, p = (float(x) for x in v.split(","))
            except ValueError as exc:
                raise InputError(f"--sampling {v!r} is not greedy, official or T,top_p",
                                 "e.g. --sampling greedy --sampling 1.0,0.95") from exc
            if t <= 0 or not 0 < p <= 1:
                raise InputError(f"--sampling {v}: need T > 0 and 0 < top_p <= 1",
                                 "use greedy for T=0")
            pair = (t, p)
        if sampled is not None and sampled != pair:
            raise InputError("one sampled setting per diagnosis", "pass --sampling once per kind")
        sampled = pair
    if not greedy:
        raise InputError("diagnose needs the greedy measurement (the signature's input)",
                         "add --sampling greedy")
    return greedy, sampled


def parse_env(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        if "=" not in v or not v.split("=", 1)[0]:
            raise InputError(f"--env {v!r} is not K=V", "e.g. --env VLLM_CACHE_ROOT=/tmp/c")
        k, val = v.split("=", 1)
        out[k] = val
    return out


def lab_launch(method: str) -> Any:
    """The lab's launch command as a plain ``LaunchSpec``: the diagnosis sees a command, no
    more."""
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port

    labmod.check_installed()
    return labmod.lab_spec(method, k=None, port=free_port())


@click.command()
@click.option("--launch", "launch_cmd", default=None,
              help="The server command exactly as you run it; specdoctor starts it and changes "
                   "one argument or variable per experiment.")
@click.option("--env", "env", multiple=True, help="K=V added to the launch environment (repeat).")
@click.option("--url", default=None,
              help="A running server: measure, classify, run the oracle and the static "
                   "experiments, no restart (the served setup from --target/--draft, else from "
                   "/v1/models and the start-up log in --logs).")
@click.option("--logs", "logs", multiple=True, type=click.Path(path_type=Path),
              help="Server log file(s), - for stdin, or a pipe: signature and static "
                   "experiments; beside --url, the server's start-up log (repeat).")
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Engine that wrote the logs (default: detected from the metrics lines).")
@click.option("--target", "target_dir", default=None,
              type=click.Path(exists=True, file_okay=False, resolve_path=True, path_type=Path),
              help="With --url or --logs: the served model's directory (default: the path "
                   "/v1/models or the start-up log names, when it is one here).")
@click.option("--draft", "draft_dir", default=None,
              type=click.Path(exists=True, file_okay=False, resolve_path=True, path_type=Path),
              help="With --url or --logs: the drafter's directory (default: the start-up log's).")
@click.option("--tokenizer", "tokenizer_dir", default=None,
              type=click.Path(exists=True, file_okay=False, resolve_path=True, path_type=Path),
              help="With --url or --logs: the tokenizer's directory, when it is not the "
                   "target's.")
@click.option("--sampling", multiple=True,
              help="greedy | official (T=1.0, top_p=0.95) | T,top_p (repeat; default greedy and "
                   "official).")
@click.option("--suite", "suites", multiple=True, type=click.Choice(sorted(SUITES)),
              help="Prompt suites (repeat; default code and essay).")
@click.option("--num-prompts", type=int, default=8, show_default=True, help="Prompts per suite.")
@click.option("--max-tokens", type=int, default=64, show_default=True)
@click.option("--budget", type=float, default=10.0, show_default=True,
              help="Minutes for the verdict experiments (after the measurement); those past it "
                   "stay pending.")
@click.option("--reference", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help='A reference profile JSON: {"per_position": [...]} (unconditional).')
@click.option("--method", "spec_method", default=None,
              help="With --logs or --url: the speculative method the server runs (draft_model, "
                   "ngram, eagle3, mtp, dflash, ...) where its logs do not say; picks the "
                   "published reference.")
@click.option("--k", "spec_k", type=click.IntRange(1, 64), default=None,
              help="With --logs or --url: draft tokens per step, where the logs do not say.")
@click.option("--load", "load_ab", is_flag=True, help="Also measure greedy at concurrency 8.")
@click.option("--spec-off/--no-spec-off", "spec_off", default=True, show_default=True,
              help="With --launch (or the lab), when acceptance looks healthy: compare tok/s "
                   "with speculation off (one more server start).")
@click.option("--lab-method", default="draft_model", show_default=True,
              help="With no target: which lab server to diagnose.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Folder for report.md, report.html and server logs (default: a new temp one).")
@click.option("--db", type=click.Path(path_type=Path), default=None, help="SQLite store.")
@click.option("--no-store", is_flag=True, help="Do not record the investigation.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def diagnose(launch_cmd: str | None, env: tuple[str, ...], url: str | None,
             logs: tuple[Path, ...], engine: str | None, target_dir: Path | None,
             draft_dir: Path | None, tokenizer_dir: Path | None, sampling: tuple[str, ...],
             suites: tuple[str, ...],
             num_prompts: int, max_tokens: int, budget: float, reference: Path | None,
             spec_method: str | None, spec_k: int | None, load_ab: bool, spec_off: bool,
             lab_method: str, out_dir: Path | None, db: Path | None,
             no_store: bool, as_json: bool) -> None:
    """Measure, classify the symptom, rank hypotheses by the cost of deciding them, run the
    experiments cheapest first within --budget, and report the root cause with its evidence."""
    from specdoctor.diagnose.orchestrator import Options, Target, diagnose as run
    from specdoctor.launch import parse_command, stopping_started_on_exit
    from specdoctor.report.console import err_console
    from specdoctor.sources.logs import saved_inputs

    if launch_cmd is not None and (url is not None or logs):
        raise InputError("give one target: --launch, or --url (with the server's logs in "
                         "--logs, if you have them), or --logs", "pick one")
    if num_prompts < 2 or max_tokens < 1 or budget <= 0:
        raise InputError("--num-prompts must be >= 2, --max-tokens >= 1, --budget > 0",
                         "e.g. --num-prompts 8 --max-tokens 64 --budget 10")
    stated = (spec_method, spec_k, target_dir, draft_dir, tokenizer_dir)
    if any(x is not None for x in stated) and (launch_cmd is not None or not (url or logs)):
        raise InputError("--method, --k, --target, --draft and --tokenizer are read from the "
                         "server command", "drop them, or use them with --logs or --url")
    if engine is not None and not logs:
        raise InputError("--engine names the engine of the logs", "drop it, or add --logs")
    workdir = out_dir or Path(tempfile.mkdtemp(prefix="specdoctor-diagnose-"))
    # a stream (- or a pipe) is read once: kept as a file beside the report, as often read
    logs = tuple(saved_inputs([str(p) for p in logs], workdir / "logs"))
    greedy, sampled = parse_sampling(sampling)
    launch = None
    if launch_cmd is not None:
        launch = parse_command(launch_cmd, parse_env(env), any_server=True)
    elif env:
        raise InputError("--env only applies to --launch", "drop --env, or add --launch")
    elif url is None and not logs:
        launch = lab_launch(lab_method)
    opts = Options(greedy=greedy, sampled=sampled, suites=suites or ("code", "essay"),
                   prompts_per_suite=num_prompts, max_tokens=max_tokens, budget_min=budget,
                   reference_file=reference, concurrency8=load_ab, spec_off=spec_off,
                   workdir=workdir, method=spec_method, k=spec_k, target_dir=target_dir,
                   draft_dir=draft_dir, tokenizer_dir=tokenizer_dir, engine=engine)
    store = None
    if not no_store:
        from specdoctor.store.ledger import open_ledger_store

        store = open_ledger_store(db)
    console = err_console()
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        console.print(f"[dim]{time.monotonic() - t0:6.0f}s[/dim] {msg}")

    try:
        # SIGTERM/SIGHUP unwind like Ctrl-C; no server outlives the command, however it ends
        with stopping_started_on_exit():
            d = run(Target(launch=launch, url=url, logs=logs), opts, None, store, progress)
    finally:
        if store is not None:
            store.close()
    if as_json:
        click.echo(json.dumps(d.to_json()))
        return
    _print(d)


def _print(d: Any) -> None:
    out = Console()
    out.print(f"[bold]signature: {d.signature.cls}[/bold] — {d.signature.evidence}")
    t = Table(header_style="bold")
    for col in ("hypothesis", "cost (cpu/gpu min, restarts)", "verdict", "evidence"):
        t.add_column(col)
    for e in d.ledger.entries:
        t.add_row(e.hypothesis, f"{e.cost.cpu_min:g}/{e.cost.gpu_min:g}, {e.cost.restarts}",
                  e.verdict.value, (e.evidence[-1] if e.evidence else "")[:140])
    out.print(t)
    out.print(f"root cause: [bold]{d.root_cause or 'none'}[/bold]"
              + (f" (also: {', '.join(d.other_causes)})" if d.other_causes else ""))
    for n in d.notes:
        out.print(f"note: {n}")
    if d.report:
        out.print(f"report: {d.report} (and report.html)")
    if d.investigation is not None:
        out.print(f"ledger: specdoctor ledger show {d.investigation}")
