"""`specdoctor probe list|build|run|lines`: sitecustomize probe packs.

    specdoctor probe list
    specdoctor probe build SPEC.toml -o DIR
    specdoctor probe run startup -- python -m vllm.entrypoints.openai.api_server --model M …
    specdoctor probe lines SERVER.log
    specdoctor lab up --patch startup      # a lab server with a pack on (see docs/experiments.md)
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from specdoctor.cli.options import example, json_option, out_option
from specdoctor.packs import build as buildmod
from specdoctor.packs import run as runmod
from specdoctor.packs import shipped
from specdoctor.packs import spec as specmod
from specdoctor.report.console import err_console
from specdoctor.textfile import read_text


@click.group(epilog=example(
    "specdoctor probe list && specdoctor lab up --patch startup"))
def probe() -> None:
    """Probe packs: log what the engine really built and did, without changing it.
    """


@probe.command("list", epilog=example(
    "specdoctor probe list --json"))
@json_option
def list_(as_json: bool) -> None:
    """The packs specdoctor ships (pass a name wherever a SPEC is asked).
    """
    found = {n: specmod.load(p) for n, p in shipped.available().items()}
    if as_json:
        click.echo(json.dumps({n: {"spec": str(shipped.available()[n]), "gate": s.gate,
                                   "probes": [p.to_json() for p in s.probes]}
                               for n, s in found.items()}))
        return
    for n, s in found.items():
        click.echo(f"{n}: " + ", ".join(f"{p.name} ({p.target})" for p in s.probes))


@probe.command("build", epilog=example(
    "specdoctor probe build startup -o /tmp/startup-pack"))
@click.argument("spec_ref", metavar="SPEC")
@out_option("Directory for the pack (new, empty, or an earlier pack).", required=True)
@click.option("--runtime", default=None, metavar="REL",
              help="Use the runtime at this path relative to the pack instead of copying it in.")
@json_option
def build_(spec_ref: str, out_dir: Path, runtime: str | None, as_json: bool) -> None:
    """Build a pack (a sitecustomize.py directory) from a TOML spec or a shipped pack name.
    """
    built = buildmod.build(specmod.load(shipped.resolve(spec_ref)), out_dir, runtime)
    if as_json:
        click.echo(json.dumps(built.to_json()))
        return
    click.echo(f"pack {built.name}: {built.dir}")
    click.echo(f"turn it on: PYTHONPATH={built.dir}:$PYTHONPATH {built.gate}=1 COMMAND …")


@probe.command("run", context_settings={"ignore_unknown_options": True}, epilog=example(
    "specdoctor probe run startup --timeout 300 -- vllm serve MODEL --speculative-config '{...}'"))
@click.argument("spec_ref", metavar="SPEC")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option("--timeout", "timeout_s", type=float, default=None,
              help="Stop the command after this many seconds (its lines are kept).")
@click.option("--quiet", is_flag=True, help="Do not pass the command's output through.")
@json_option
def run_(spec_ref: str, command: tuple[str, ...], timeout_s: float | None, quiet: bool,
         as_json: bool) -> None:
    """Run COMMAND (after --) with the pack on; print and store its [probe] lines.
    """
    result = runmod.run_command(spec_ref, list(command), echo=not quiet and not as_json,
                                timeout_s=timeout_s)
    if as_json:
        click.echo(json.dumps(result.to_json()))
        return
    _print_lines(result.lines)
    err_console().print(f"command exited {result.returncode}; {len(result.lines)} probe lines "
                        f"stored in {result.run_dir}")


@probe.command("lines", epilog=example(
    "specdoctor probe lines server.log --probe speculative-config"))
@click.argument("log", type=click.Path(path_type=Path))
@click.option("--probe", "only", default=None, help="Only this probe's lines.")
@json_option
def lines_(log: Path, only: str | None, as_json: bool) -> None:
    """The [probe] lines of a server log (for example a lab server started with --patch).
    """
    text = read_text(log)
    found = [ln for ln in runmod.collect(text) if only is None or ln.probe == only]
    if as_json:
        click.echo(json.dumps({"log": str(log), "lines": [ln.to_json() for ln in found]}))
        return
    if not found:
        err_console().print(f"no [probe] lines in {log}")
    _print_lines(found)


def _print_lines(lines: list[runmod.ProbeLine]) -> None:
    from specdoctor.safe_text import visible

    for ln in lines:  # a log's probe name is shown, its control characters escaped
        click.echo(f"[probe] {visible(ln.probe)} {json.dumps(ln.data)}")
