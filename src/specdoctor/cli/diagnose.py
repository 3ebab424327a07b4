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
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from specdoctor.bench.prompts import SUITES, check_count
from specdoctor.cli.options import (
    LIST_HINT,
    db_option,
    env_option,
    example,
    json_option,
    list_option,
    out_option,
    parse_env,
    ready_timeout_option,
)
from specdoctor.diagnose.orchestrator import Options
from specdoctor.errors import InputError
from specdoctor.lab.lab import DEFAULT_METHOD as LAB_DEFAULT_METHOD
from specdoctor.lab.lab import METHODS as LAB_METHODS
from specdoctor.methods import SPECULATIVE_METHODS


def sampling_items(values: tuple[str, ...]) -> list[str]:
    """The --sampling values as items: repeated or comma-separated, a ``T,top_p`` pair kept
    together (``greedy,1.0,0.95`` is greedy and T=1.0, top_p=0.95)."""
    items: list[str] = []
    for v in values:
        parts = [p.strip() for p in v.split(",") if p.strip()]
        i = 0
        while i < len(parts):
            if _number(parts[i]) and i + 1 < len(parts) and _number(parts[i + 1]):
                items.append(f"{parts[i]},{parts[i + 1]}")
                i += 2
            else:
                items.append(parts[i])
                i += 1
    return items


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
from specdoctor.sources.registry import ENGINES


def parse_sampling(values: tuple[str, ...]) -> tuple[bool, tuple[float, float] | None]:
    """``greedy``, ``official`` (T=1.0, top_p=0.95) or ``T,top_p``; at most one sampled."""
    from specdoctor.diagnose.target import OFFICIAL

    greedy, sampled = False, None
    for v in sampling_items(values) or ("greedy", "official"):
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
            if not 0 < t <= 100 or not 0 < p <= 1:
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


def lab_launch(method: str) -> Any:
    """The lab's launch command as a plain ``LaunchSpec``: the diagnosis sees a command, no
    more."""
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port

    labmod.check_installed()
    return labmod.lab_spec(method, k=None, port=free_port())


O = Options()  # the defaults shown here are the diagnosis's own


@click.command(epilog=example(
    "specdoctor diagnose --logs server.log,server.1.log --method eagle3 --k 3"))
@click.option("--launch", "launch_cmd", default=None,
              help="The server command exactly as you run it; specdoctor starts it and changes "
                   "one argument or variable per experiment.")
@env_option("Added to the launch environment.", dest="env")
@click.option("--url", default=None,
              help="A running server: measure, classify, run the oracle and the static "
                   "experiments, no restart (the served setup from --target/--draft, else from "
                   "/v1/models and the start-up log in --logs).")
@list_option("--logs", "logs", kind=Path, files=True, metavar="FILE|-",
             help="Server log files, - for stdin, or a pipe: signature and static experiments; "
                  "beside --url, the server's start-up log.")
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Engine that wrote the logs (default: detected from the metrics lines).")
@click.option("--by-file", is_flag=True,
              help="With --logs alone: diagnose each log apart (each file, and each part of a "
                   "file with its own engine, method or k); needed when they differ, as for "
                   "specdoctor logs.")
@click.option("--target", "target_dir", default=None,
              type=click.Path(exists=True, resolve_path=True, path_type=Path),
              help="With --url or --logs: the served model's directory, or the GGUF file "
                   "llama-server reads (default: the path /v1/models or the start-up log "
                   "names, when it is one here).")
@click.option("--draft", "draft_dir", default=None,
              type=click.Path(exists=True, resolve_path=True, path_type=Path),
              help="With --url or --logs: the drafter's directory or GGUF file (default: the "
                   "start-up log's).")
@click.option("--tokenizer", "tokenizer_dir", default=None,
              type=click.Path(exists=True, file_okay=False, resolve_path=True, path_type=Path),
              help="With --url or --logs: the tokenizer's directory, when it is not the "
                   "target's.")
@click.option("--sampling", multiple=True, metavar="greedy|official|T,top_p",
              help="greedy, official (T=1.0, top_p=0.95) or a T,top_p pair; at most one "
                   "sampled setting. Default: greedy,official. " + LIST_HINT)
@list_option("--suite", "suites", choices=sorted(SUITES),
             help=f"Prompt suites. Default: {','.join(O.suites)}.")
@click.option("--num-prompts", type=int, default=O.prompts_per_suite, show_default=True,
              help="Prompts per suite.")
@click.option("--max-tokens", type=int, default=O.max_tokens, show_default=True)
@click.option("--budget", type=float, default=O.budget_min, show_default=True,
              help="Minutes for the verdict experiments (after the measurement); those past it "
                   "stay pending.")
@click.option("--reference", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help='A reference profile JSON: {"per_position": [...]} (unconditional).')
@click.option("--method", "spec_method", type=click.Choice(SPECULATIVE_METHODS), default=None,
              help="With --logs or --url: the speculative method the server runs, where its "
                   "logs do not say; picks the published reference.")
@click.option("--k", "spec_k", type=click.IntRange(1, 64), default=None,
              help="With --logs or --url: draft tokens per step, where the logs do not say.")
@click.option("--load/--no-load", "load_ab", default=O.concurrency8, show_default=True,
              help="Also measure greedy at concurrency 8: a correct engine accepts the same "
                   "as at concurrency 1 (batching bugs show only there).")
@click.option("--spec-off/--no-spec-off", "spec_off", default=O.spec_off, show_default=True,
              help="With --launch (or the lab), when acceptance looks healthy: compare tok/s "
                   "with speculation off (one more server start).")
@click.option("--lab-method", type=click.Choice(LAB_METHODS), default=LAB_DEFAULT_METHOD,
              show_default=True, help="With no target: which lab server to diagnose.")
@ready_timeout_option(O.ready_timeout_s)
@out_option("Folder for report.md, report.html and server logs (default: a new temp one).",
            default=None)
@db_option
@click.option("--no-store", is_flag=True, help="Do not record the investigation.")
@json_option
def diagnose(launch_cmd: str | None, env: tuple[str, ...], url: str | None,
             logs: tuple[Path, ...], engine: str | None, by_file: bool,
             target_dir: Path | None,
             draft_dir: Path | None, tokenizer_dir: Path | None, sampling: tuple[str, ...],
             suites: tuple[str, ...],
             num_prompts: int, max_tokens: int, budget: float, reference: Path | None,
             spec_method: str | None, spec_k: int | None, load_ab: bool, spec_off: bool,
             lab_method: str, ready_timeout: float, out_dir: Path | None, db: Path | None,
             no_store: bool, as_json: bool) -> None:
    """Measure, classify the symptom, rank hypotheses by the cost of deciding them, run the
    experiments cheapest first within --budget, and report the root cause with its evidence.
    With no target it diagnoses the embedded lab.
    """
    from specdoctor.diagnose.orchestrator import Target, diagnose as run
    from specdoctor.launch import parse_command, stopping_started_on_exit
    from specdoctor.report.console import err_console
    from specdoctor.sources.logs import saved_inputs

    if launch_cmd is not None and (url is not None or logs):
        raise InputError("give one target: --launch, or --url (with the server's logs in "
                         "--logs, if you have them), or --logs", "pick one")
    if num_prompts < 2 or max_tokens < 1 or not 0 < budget <= 24 * 60:
        raise InputError("--num-prompts must be >= 2, --max-tokens >= 1, 0 < --budget <= 1440",
                         "e.g. --num-prompts 8 --max-tokens 64 --budget 10")
    check_count(num_prompts)
    for flag, given in (("--target", target_dir), ("--draft", draft_dir)):
        if given is not None and given.is_file():
            from specdoctor import gguf_files

            if not gguf_files.is_gguf(given):
                raise InputError(f"{flag} {given} is a file but not a GGUF file",
                                 f"give {flag} a model directory or the .gguf file the server "
                                 "reads")
    stated = (spec_method, spec_k, target_dir, draft_dir, tokenizer_dir)
    if any(x is not None for x in stated) and (launch_cmd is not None or not (url or logs)):
        raise InputError("--method, --k, --target, --draft and --tokenizer are read from the "
                         "server command", "drop them, or use them with --logs or --url")
    if engine is not None and not logs:
        raise InputError("--engine names the engine of the logs", "drop it, or add --logs")
    if reference is not None:
        from specdoctor.diagnose.references import load_user_reference

        load_user_reference(reference)
    workdir = out_dir or Path(tempfile.mkdtemp(prefix="specdoctor-diagnose-"))
    # a stream (- or a pipe) is read once: kept as a file beside the report, as often read
    logs = tuple(saved_inputs([str(p) for p in logs], workdir / "logs"))
    if by_file and (url is not None or not logs):
        raise InputError("--by-file diagnoses each log of --logs apart",
                         "drop it, or give --logs without --url")
    parts = _log_parts(logs, engine, spec_k, by_file, workdir) if logs and url is None else []
    greedy, sampled = parse_sampling(sampling)
    launch = None
    if launch_cmd is not None:
        launch = parse_command(launch_cmd, parse_env(env), any_server=True)
    elif env:
        raise InputError("--env only applies to --launch", "drop --env, or add --launch")
    elif url is None and not logs:
        launch = lab_launch(lab_method)
    opts = Options(greedy=greedy, sampled=sampled, suites=suites or O.suites,
                   prompts_per_suite=num_prompts, max_tokens=max_tokens, budget_min=budget,
                   reference_file=reference, concurrency8=load_ab, spec_off=spec_off,
                   workdir=workdir, method=spec_method, k=spec_k,
                   ready_timeout_s=ready_timeout, target_dir=target_dir,
                   draft_dir=draft_dir, tokenizer_dir=tokenizer_dir, engine=engine)
    store = None
    if not no_store:
        from specdoctor.store.ledger import open_ledger_store

        store = open_ledger_store(db)
    console = err_console()
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        console.print(f"[dim]{time.monotonic() - t0:6.0f}s[/dim] {msg}")

    if len(parts) > 1:  # --by-file: one diagnosis per part, each reported
        done = []
        try:
            for i, (name, path) in enumerate(parts, 1):
                progress(f"log {i} of {len(parts)}: {name}")
                own = replace(opts, workdir=workdir / f"log-{i}")
                done.append((name, run(Target(logs=(path,)), own, None, store, progress)))
        finally:
            if store is not None:
                store.close()
        if as_json:
            click.echo(json.dumps({"by_file": [{"source": name, **d.to_json()}
                                               for name, d in done]}))
            return
        for name, d in done:
            Console().rule(escape(name))
            _print(d, db)
        return
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
    _print(d, db)


def _log_parts(logs: tuple[Path, ...], engine: str | None, k: int | None, by_file: bool,
               workdir: Path) -> list[tuple[str, Path]]:
    """The logs as the diagnosis' target, refused as `logs` refuses them (exit 2) before any
    work: binary, empty, no metrics, several engines or speculative configs together (unless
    ``by_file``). With ``by_file``: each part (a file, or a part of one with its own engine or
    k) as a file of its own, to diagnose apart; else none."""
    from specdoctor.errors import SpeculationOff
    from specdoctor.sources.logs import read_logs, write_parts

    try:
        lt = read_logs([str(p) for p in logs], engine, keep_windows=False, last_windows=1,
                       by_file=by_file, k=k)
    except SpeculationOff:
        return []  # no bad input: the diagnosis says speculation was off
    return write_parts(lt, workdir / "logs") if by_file else []


def _print(d: Any, db: Path | None = None) -> None:
    from specdoctor.report.table import ledger_table

    out = Console()
    out.print(f"[bold]signature: {d.signature.cls}[/bold] — {escape(d.signature.evidence)}")
    out.print(ledger_table(d.ledger.to_json()))
    from specdoctor.diagnose.report import answer_words, root_cause_lines

    words = answer_words(d.root_cause, d.root_cause_basis, d.undetermined, d.signature.cls,
                         d.ledger.to_json())
    out.print(f"root cause: [bold]{escape(words[0])}[/bold]"
              + (f" (also: {', '.join(d.other_causes)})" if d.other_causes else ""))
    for w in words[1:]:
        out.print(w, markup=False)

    for line in root_cause_lines(d):
        if line:
            out.print(line, markup=False)
    from specdoctor.cli.options import db_words
    from specdoctor.report.console import err_console
    from specdoctor.report.table import print_notes

    print_notes(err_console(), d.notes)  # on stderr, each once, as every command's notes
    if d.report:
        out.print(f"report: {d.report} (and report.html)", markup=False, soft_wrap=True)
    if d.investigation is not None:
        out.print(f"ledger: specdoctor ledger show {d.investigation}{db_words(db)}",
                  markup=False, soft_wrap=True)   # a command line: kept whole, never wrapped
