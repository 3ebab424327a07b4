"""`specdoctor gate`: is a candidate server worse than a baseline, beyond noise? Exit 0 (no
significant regression), 1 (a significant regression beyond --max-drop), 2 (bad input), 3 (the
candidate could not be measured), as README's exit status table says for every command. Also
stores (`--save`), exports (`--export`) and lists (`--list`) named baselines. The work and its
defaults are in ``specdoctor.gate``; this parses and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from specdoctor.cli.options import (
    Seconds,
    db_option,
    env_option,
    example,
    json_option,
    list_option,
    ready_timeout_option,
)
from specdoctor.errors import InputError
from specdoctor.gate.run import GateOptions
from specdoctor.lab.lab import DEFAULT_K, LabRequest
from specdoctor.lab.lab import METHODS as LAB_METHODS

G = GateOptions()  # the defaults shown here are the gate's own


def parse_drop(text: str) -> float:
    """``5%`` or ``0.05`` → 0.05."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1 or (not t.endswith("%") and value >= 1):
        raise InputError(f"--max-drop {text!r} is not a drop between 0 and 100%",
                         "write it as a percentage or a fraction: --max-drop 5% or 0.05")
    return value


@click.command(epilog=example(
    "specdoctor gate --baseline prod --url http://127.0.0.1:8000 --suite code,essay -c 1,8",
    "specdoctor gate --save prod 12",
    "specdoctor gate --export prod baseline.json"))
@click.option("--baseline", "baseline_ref", metavar="RUN_ID|NAME|FILE", default=None,
              help="What to compare against: a bench run id, a baseline saved with --save, or "
                   "a file written by --export.")
@click.option("--url", default=None, help="The candidate: a running server's base URL.")
@click.option("--launch", "launch_cmd", default=None, metavar="COMMAND",
              help="The candidate: the server command as you run it; specdoctor starts it on a "
                   "free port (and its spec-off twin when the baseline has one), measures, stops.")
@env_option("Environment for --launch.")
@click.option("--lab", is_flag=True, help="The candidate: the lab (real vLLM on tiny models).")
@click.option("--method", type=click.Choice(LAB_METHODS), default=LabRequest.method,
              show_default=True, help="--lab: speculative method.")
@click.option("--k", type=click.IntRange(1, 64), default=DEFAULT_K, show_default=True,
              help="--lab: draft tokens per step.")
@list_option("--suite", "suites",
             help="Only these prompt sets of the baseline (default: all of its cells).")
@list_option("--sampling", help="Only these samplings of the baseline (greedy, official).")
@list_option("--concurrency", "-c", kind=int, help="Only these concurrencies of the baseline.")
@click.option("--seed", type=int, default=None,
              help="Base seed of the sampled cells (default: the baseline's, so a server that "
                   "did not change replays its streams); another draws fresh samples.")
@click.option("--model", default=None, help="Model name to request (default: the first listed).")
@click.option("--max-drop", "max_drop", default=f"{G.max_drop:.0%}", show_default=True,
              help="The largest drop (relative to the baseline) that passes even when significant.")
@click.option("--alpha", type=float, default=G.alpha, show_default=True,
              help="Family-wise false-alarm rate of the whole gate (Holm over every test).")
@click.option("--diagnose", "run_diagnose", is_flag=True,
              help="On a failing gate, run `specdoctor diagnose` on the candidate and print its "
                   "root cause.")
@click.option("--request-timeout", type=Seconds(), default=None,
              help="Seconds before one request counts as a timeout (default: the baseline's).")
@ready_timeout_option(G.ready_timeout_s)
@click.option("--save", "save_name", default=None, metavar="NAME",
              help="Store bench run RUN_ID (default: the latest) as the baseline NAME.")
@click.option("--config", "config_label", default=None, metavar="LABEL",
              help="--save: which configuration of a run that has several.")
@click.option("--export", "export_args", nargs=2, default=None, metavar="NAME FILE",
              help="Write baseline NAME (or a RUN_ID) as one JSON file to commit beside your "
                   "deployment config.")
@click.option("--list", "list_saved", is_flag=True, help="List the saved baselines.")
@db_option
@json_option
@click.argument("run_id", type=int, required=False)
def gate(baseline_ref: str | None, url: str | None, launch_cmd: str | None,
         env_kv: tuple[str, ...], lab: bool, method: str, k: int, suites: tuple[str, ...],
         sampling: tuple[str, ...], concurrency: tuple[int, ...], seed: int | None,
         model: str | None, max_drop: str, alpha: float, run_diagnose: bool,
         request_timeout: float | None, ready_timeout: float, save_name: str | None,
         config_label: str | None, export_args: tuple[str, str] | None, list_saved: bool,
         db: Path | None, as_json: bool, run_id: int | None) -> None:
    """Gate a candidate server against a baseline: the baseline's cells, prompts, sampling,
    concurrency and max tokens, every figure tested two-sided with the family-wise false-alarm
    rate held at --alpha; acceptance paired over the prompts both runs sent where they pair.
    Prints, per figure, the smallest drop the gate would catch at the baseline's size.
    """
    from specdoctor.gate import run as gaterun

    if run_id is not None and save_name is None:
        raise InputError(f"a bare RUN_ID ({run_id}) goes with --save NAME",
                         "to gate against a run, pass --baseline RUN_ID")
    modes = [m for m, on in (("--baseline", baseline_ref is not None),
                             ("--save", save_name is not None),
                             ("--export", export_args is not None), ("--list", list_saved)) if on]
    if len(modes) != 1:
        raise InputError(f"say what to do: one of --baseline, --save, --export or --list "
                         f"(got {', '.join(modes) or 'none'})",
                         "e.g. specdoctor gate --baseline prod --url http://127.0.0.1:8000")
    if save_name is not None:
        b = gaterun.save(save_name, run_id, db, config_label)
        return _say({"saved": save_name, **_summary(b)}, as_json,
                    f"saved {b.describe()} as baseline {save_name!r}: {len(b.cells)} cells; "
                    f"export it with: specdoctor gate --export {save_name} FILE")
    if export_args is not None:
        name, file = export_args
        b = gaterun.export(name, Path(file), db)
        return _say({"exported": name, "file": file, **_summary(b)}, as_json,
                    f"wrote {file}: {b.describe()}, {len(b.cells)} cells; gate against it with: "
                    f"specdoctor gate --baseline {file} --url URL")
    if list_saved:
        return _list(db, as_json)
    assert baseline_ref is not None
    if not 0 < alpha < 1:
        raise InputError(f"--alpha {alpha} is not a probability", "e.g. --alpha 0.05")
    drop = parse_drop(max_drop)
    candidate = _candidate(url, launch_cmd, env_kv, lab, method, k)
    opts = gaterun.GateOptions(suites=suites, sampling=sampling, concurrency=concurrency,
                               seed=seed, model=model, alpha=alpha, max_drop=drop,
                               request_timeout_s=request_timeout, ready_timeout_s=ready_timeout,
                               diagnose=run_diagnose, db=db)
    res = _run(baseline_ref, candidate, opts, as_json)
    if as_json:
        click.echo(json.dumps(res.to_json()))
    else:
        from specdoctor.gate.text import render

        click.echo(render(res), nl=False)
    if res.exit_code:
        raise SystemExit(res.exit_code)


def _run(ref: str, candidate: Any, opts: Any, quiet: bool) -> Any:
    from specdoctor.gate import run as gaterun
    from specdoctor.launch import stopping_started_on_exit
    from specdoctor.report.bench_console import ConsoleEvents
    from specdoctor.report.console import err_console

    console = err_console()
    with stopping_started_on_exit():  # a launched server never outlives the gate
        return gaterun.gate(ref, candidate, opts,
                            events=lambda rid, plan: ConsoleEvents(rid, plan, quiet=quiet),
                            progress=lambda m: console.print(m, highlight=False, markup=False))


def _candidate(url: str | None, launch_cmd: str | None, env_kv: tuple[str, ...], lab: bool,
               method: str, k: int) -> Any:
    import shlex

    from specdoctor.gate.run import Candidate

    given = [x for x, on in (("--url", url), ("--launch", launch_cmd), ("--lab", lab)) if on]
    if len(given) != 1:
        raise InputError("say what to gate: exactly one of --url, --launch or --lab",
                         "e.g. specdoctor gate --baseline prod --url http://127.0.0.1:8000")
    if env_kv and launch_cmd is None:
        raise InputError("--env only applies to --launch", "drop --env, or use --launch")
    if url is not None:
        return Candidate(f"--url {shlex.quote(url)}", url=url.rstrip("/"))
    if launch_cmd is not None:
        from specdoctor.cli.options import parse_env
        from specdoctor.launch import parse_command

        flags = f"--launch {shlex.quote(launch_cmd)}" + "".join(
            f" --env {shlex.quote(e)}" for e in env_kv)
        return Candidate(flags, spec=parse_command(launch_cmd, parse_env(env_kv)))
    from specdoctor.cli.bench import lab_base
    from specdoctor.errors import LabError, TargetError

    try:
        spec = lab_base(method, k, "completions")
    except LabError as exc:  # the gate's contract: a candidate that cannot run is exit 3
        raise TargetError(exc.problem, exc.fix) from exc
    return Candidate(f"--lab --method {method} --k {k}", spec=spec)


def _summary(b: Any) -> dict[str, Any]:
    return {"baseline": b.describe(), "cells": [c.sample.cell for c in b.cells],
            "source": b.source, "target": b.target}


def _say(obj: dict[str, Any], as_json: bool, text: str) -> None:
    click.echo(json.dumps(obj) if as_json else text)


def _list(db: Path | None, as_json: bool) -> None:
    from specdoctor.store.baselines import open_baseline_store

    store = open_baseline_store(db)
    try:
        saved = store.latest()
    finally:
        store.close()
    items = [{"name": s.name, "label": (s.doc.get("target") or {}).get("label"),
              "measured_at": (s.doc.get("source") or {}).get("measured_at"),
              "bench_run": (s.doc.get("source") or {}).get("bench_run"),
              "cells": len(s.doc.get("cells") or [])} for s in saved]
    if as_json:
        click.echo(json.dumps({"baselines": items}))
        return
    if not items:
        click.echo("no saved baselines; save one with: specdoctor gate --save NAME RUN_ID")
    for i in items:
        click.echo(f"{i['name']}: {i['label']}, bench run {i['bench_run']}, measured "
                   f"{i['measured_at']}, {i['cells']} cells")
