"""`specdoctor taps check DIR` and `specdoctor taps case-b DIR`: tensor taps, checked in fp64.

    SPECDOCTOR_TAPS=/tmp/taps <server with a probe that calls specdoctor.packs.tap.tap>
    specdoctor taps check /tmp/taps [--json]
    specdoctor taps case-b /tmp/caseb && specdoctor taps check /tmp/caseb

`check` exits 0 when no finding is a fault, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from specdoctor.cli.options import example, json_option
from specdoctor.report.console import err_console

STYLE = {"fault": "red", "ok": "green", "note": "dim"}


@click.group(epilog=example(
    "specdoctor taps case-b /tmp/caseb && specdoctor taps check /tmp/caseb"))
def taps() -> None:
    """Tensor taps: dumps from inside a server, recomputed in fp64 and checked across ranks.
    """


@taps.command(epilog=example(
    "specdoctor taps check /tmp/taps --json"))
@click.argument("directory", type=click.Path(path_type=Path))
@json_option
def check(directory: Path, as_json: bool) -> None:
    """Recompute every tapped attention in fp64 and compare the ranks before the reduction.
    """
    from specdoctor.experiments.taps.check import check_dir

    with err_console().status(f"reading and recomputing the taps in {directory}"):
        findings = check_dir(directory)
    faults = [f for f in findings if f.level == "fault"]
    if as_json:
        click.echo(json.dumps({"ok": not faults, "directory": str(directory),
                               "findings": [asdict(f) for f in findings]}, indent=1, default=str))
    else:
        con = Console()
        for f in findings:
            con.print(f"[{STYLE[f.level]}]{f.level:5}[/{STYLE[f.level]}] {f.check:16} {escape(f.where)}: "
                      f"{escape(f.message)}", highlight=False)
        kinds = sorted({f.check for f in faults})
        con.print(f"[red]FAULT[/red]: {len(faults)} findings ({', '.join(kinds)})" if faults
                  else "[green]no fault[/green] in these taps", highlight=False)
    sys.exit(1 if faults else 0)


@taps.command("case-b", epilog=example(
    "specdoctor taps case-b /tmp/caseb --json"))
@click.argument("directory", type=click.Path(path_type=Path))
@json_option
def case_b(directory: Path, as_json: bool) -> None:
    """Run Case B in miniature (gloo, 4 CPU ranks) and write its taps to DIRECTORY.
    """
    from specdoctor.experiments.taps.case_b import WORLD, run

    with err_console().status("4 ranks: target and draft decode attention over a sharded KV cache"):
        run(directory)
    files = sorted(p.name for p in directory.glob("*.safetensors"))
    if as_json:
        click.echo(json.dumps({"directory": str(directory), "ranks": WORLD, "taps": files,
                               "check": f"specdoctor taps check {directory}"}))
        return
    click.echo(f"taps written to {directory}; now: specdoctor taps check {directory}")
