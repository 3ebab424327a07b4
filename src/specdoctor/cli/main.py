"""Entry point of the `specdoctor` command.

Commands live one per module under `specdoctor.cli`; they are imported lazily,
so `specdoctor --help` and the measurement commands start fast on a machine
without torch or vLLM.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from specdoctor import __version__
from specdoctor import errors
from specdoctor.cli.options import example
from specdoctor.errors import SpecdoctorError
from specdoctor.safe_text import visible

# command name -> (module, attribute, one-line help shown by --help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "logs": ("specdoctor.cli.logs", "logs", "Acceptance from engine log files (vLLM, SGLang, llama.cpp)."),
    "metrics": ("specdoctor.cli.metrics", "metrics", "Acceptance from one Prometheus dump (file or URL)."),
    "measure": ("specdoctor.cli.measure", "measure", "Run the measurement protocol against a live server."),
    "lab": ("specdoctor.cli.lab", "lab", "The embedded lab: real vLLM with speculative decoding."),
    "runs": ("specdoctor.cli.runs", "runs", "List or show runs recorded in the store."),
    "recon": ("specdoctor.cli.recon", "recon", "Static reconnaissance: engine source out of images, wheels, envs."),
    "astexec": ("specdoctor.cli.astexec", "astexec", "Run real engine functions with stubs, without the engine."),
    "masks": ("specdoctor.cli.masks", "masks", "Model attention masks per backend and diff them bit by bit."),
    "kernels": ("specdoctor.cli.kernels", "kernels", "Attention kernels vs an fp64 reference on paged KV caches."),
    "taps": ("specdoctor.cli.taps", "taps", "Tensor taps: dumps from a server, fp64 recompute, cross-rank checks."),
    "oracle": ("specdoctor.cli.oracle", "oracle", "The acceptance a correct engine must reach with these weights."),
    "probe": ("specdoctor.cli.probe", "probe", "Probe packs: log what the engine really built and did."),
    "audit": ("specdoctor.cli.audit", "audit", "Draft-vs-target config audits: parallel, models, launch."),
    "cache": ("specdoctor.cli.cache", "cache", "vLLM's compile cache: scan it, A/B it against a fresh one."),
    "bench": ("specdoctor.cli.bench", "bench", "Benchmark matrix: acceptance, tok/s and latency per cell, spec-off baseline."),
    "sweep": ("specdoctor.cli.sweep", "sweep", "Sweep launch parameters (k, method, drafter) against a spec-off baseline."),
    "gate": ("specdoctor.cli.gate", "gate", "Regression gate: a candidate server against a saved baseline, beyond noise."),
    "report": ("specdoctor.cli.report", "report", "Markdown + HTML report of a bench or sweep run."),
    "diagnose": ("specdoctor.cli.diagnose", "diagnose", "Why acceptance is low: signature, hypothesis ledger, verdict experiments."),
    "ledger": ("specdoctor.cli.ledger", "ledger", "Hypothesis ledgers of past diagnoses."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, (mod, _, _) in COMMANDS.items() if _module_exists(mod))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, short = COMMANDS[cmd_name]
        if not _module_exists(module):
            return None
        if ctx.resilient_parsing or _listing_help(ctx):
            return click.Command(cmd_name, short_help=short, help=short)
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx: click.Context) -> Any:
        from rich.console import Console  # rich would exit 1 on a closed pipe: it raises instead

        Console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # `specdoctor logs x | head`: the reader has what it wanted
            _quiet_stdout()
            return 0


def _raise_broken_pipe(console: Any) -> None:
    console.quiet = True
    raise BrokenPipeError


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the output still buffered is flushed nowhere at exit
    instead of raising again (the exit status stays 0, as for `seq 1e9 | head`)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _listing_help(ctx: click.Context) -> bool:
    # `specdoctor --help` only needs the one-line help of each command.
    return ctx.invoked_subcommand is None and "--help" in sys.argv[1:2]


@click.group(cls=LazyGroup, invoke_without_command=True, epilog=example(
    "specdoctor diagnose --url http://127.0.0.1:8000"))
@click.version_option(__version__, prog_name="specdoctor")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Find out why speculative decoding accepts fewer draft tokens than it should.

    The main command is `diagnose`: it measures a server (your URL, your logs, a command it
    starts, or the embedded lab), classifies the symptom and runs the experiments that decide
    its cause. With no command, specdoctor starts nothing: it says what it can do.
    """
    if ctx.invoked_subcommand is None:
        click.echo(WHAT_TO_RUN)
        _say_running()


WHAT_TO_RUN = """\
specdoctor finds out why speculative decoding accepts fewer draft tokens than it should.
Given no command, it starts nothing. To diagnose:

  specdoctor diagnose --url http://HOST:PORT    a running server (no restart)
  specdoctor diagnose --logs server.log         a server's logs
  specdoctor diagnose --launch 'vllm serve …'   a command it starts, changing one thing per experiment
  specdoctor diagnose                           the embedded lab (starts and stops a vLLM server)

Or start the lab and keep it up: specdoctor lab up. Every command: specdoctor --help."""


def _say_running() -> None:
    """Lab servers already up, with the command that stops each (nothing is started here)."""
    from specdoctor.lab import lab as labmod

    for h in labmod.running():
        click.echo(f"lab server running: {h.spec.url} ({h.spec.label}, pid {h.pid}); "
                   f"stop it: specdoctor lab down --port {h.spec.port}", err=True)


def main(argv: list[str] | None = None) -> Any:
    try:
        rc = cli.main(args=argv, prog_name="specdoctor", standalone_mode=False)
    except SpecdoctorError as exc:
        click.echo(f"error: {visible(exc, keep_newline=True)}", err=True)  # shown, never sent
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug, never the user's input: one line, the traceback on request
        if os.environ.get("SPECDOCTOR_TRACEBACK"):
            raise
        what = f"{type(exc).__name__}: {exc}"
        click.echo(f"internal error: {visible(what[:500])} — a bug in specdoctor, not a problem "
                   "with your input: please report it with the command line "
                   "(SPECDOCTOR_TRACEBACK=1 shows where it broke)", err=True)
        sys.exit(errors.INTERNAL)
    sys.exit(rc if isinstance(rc, int) else 0)
