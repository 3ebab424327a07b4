"""`specdoctor kernels check`: attention kernels against an fp64 reference on paged KV caches.

    specdoctor kernels check                       # default suite, every impl found, CPU
    specdoctor kernels check --impl sdpa,flex --device cuda --json
    specdoctor kernels check --suite my_shapes.json --impl mypkg.attn:paged --tol bfloat16=3e-2

Exit 0 only when every implementation that ran passes every case and the negative
control was caught; 1 otherwise; 2 on bad input.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specdoctor.errors import InputError
from specdoctor.cli.options import example, json_option, list_option
from specdoctor.experiments.kernels.cases import (
    DEFAULT_DEVICE,
    DEFAULT_SUITE,
    DEVICES,
    DTYPES,
    IMPLS,
    SUITES,
    TOLERANCES,
)
from specdoctor.report.console import err_console
from specdoctor.safe_text import markup


def _tolerances(items: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for item in items:
        dtype, sep, value = item.partition("=")
        try:
            tol = float(value)
        except ValueError:
            tol = -1.0
        if not sep or dtype not in DTYPES or not tol > 0:
            raise InputError(f"cannot read --tol {item!r}",
                             f"write DTYPE=VALUE with DTYPE one of {', '.join(DTYPES)}, e.g. bfloat16=3e-2")
        out[dtype] = tol
    return out


@click.group(epilog=example(
    "specdoctor kernels check --impl sdpa,flex --suite smoke"))
def kernels() -> None:
    """Kernel equivalence: attention implementations against an fp64 reference, paged KV.
    """


@kernels.command(epilog=example(
    "specdoctor kernels check --suite long --impl sdpa,mypkg.attn:paged --tol bfloat16=3e-2"))
@click.option("--suite", default=DEFAULT_SUITE, show_default=True,
              help=f"Built-in ({', '.join(SUITES)}) or a JSON file of cases.")
@list_option("--impl", "impls", default=IMPLS, show_default=",".join(IMPLS),
             help="Built-ins and/or MODULE:FUNCTION user adapters.")
@click.option("--device", type=click.Choice(DEVICES), default=DEFAULT_DEVICE, show_default=True)
@list_option("--tol", "tols", metavar="DTYPE=VALUE",
             help="Override a tolerance on max |out - ref| (defaults: "
                  + ", ".join(f"{k} {v:g}" for k, v in TOLERANCES.items()) + ").")
@json_option
def check(suite: str, impls: tuple[str, ...], device: str, tols: tuple[str, ...],
          as_json: bool) -> None:
    """Run every case through every implementation; the negative control must be caught.
    """
    from specdoctor.experiments.kernels.adapters import load
    from specdoctor.experiments.kernels.cases import load_suite
    from specdoctor.experiments.kernels.run import check as run_check

    tolerances = _tolerances(tols)
    cases = load_suite(suite)
    names = list(impls)
    if not names or len(names) != len(set(names)):
        raise InputError("--impl is empty or names an implementation twice", "list each once")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: torch sees no CUDA device", "use --device cpu")
    adapters = load(names, device)
    con = err_console()
    for a in adapters:
        if a.unavailable:
            con.print(f"[yellow]SKIPPED {a.name}[/yellow]: {escape(a.unavailable)}", highlight=False)
    if not any(a.unavailable is None for a in adapters):
        raise InputError("no implementation can run here", "install one or pick --impl sdpa")
    report = run_check(cases, adapters, device, suite, tolerances,
                       progress=lambda msg: con.print(markup(msg), style="dim", highlight=False))
    if as_json:
        click.echo(json.dumps(to_json(report), indent=1))
    else:
        _print(report)
    sys.exit(0 if report.ok else 1)


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"


def to_json(r: Any) -> dict[str, Any]:
    return {
        "ok": r.ok, "suite": r.suite, "device": r.device,
        "implementations": [{"name": a.name, "mask_model": a.mask_convention, "how": a.how,
                             "ran": a.unavailable is None, "skipped_because": a.unavailable}
                            for a in r.adapters],
        "cases": [asdict(c) | {"mask": c.mask} for c in r.cases],
        "results": [asdict(x) | {"ok": x.ok, "max_abs": _num(x.max_abs), "max_rel": _num(x.max_rel)}
                    for x in r.results],
        "negative_control": {"caught": r.control_caught,
                             "cases": [asdict(c) | {"must_fail": c.must_fail, "max_abs": _num(c.max_abs)}
                                       for c in r.control]},
        "seconds": {"total": r.total_seconds, "reference": r.reference_seconds, "inputs": r.build_seconds},
    }


def _print(r: Any) -> None:
    con = Console()
    table = Table(title=f"kernels check: suite {r.suite}, {len(r.cases)} cases, device {r.device}",
                  title_justify="left")
    for col in ("case", *(a.name for a in r.ran)):
        table.add_column(col, justify="left" if col == "case" else "right")
    by = {(x.impl, x.case): x for x in r.results}
    for c in r.cases:
        cells = []
        for a in r.ran:
            x = by[(a.name, c.name)]
            text = "error" if x.error else f"{x.max_abs:.1e}"
            cells.append(f"[green]{text}[/green]" if x.ok else f"[red]{text}[/red]")
        table.add_row(markup(c.name), *cells)  # a suite's case name: shown, never sent
    con.print(table)
    con.print("cells: max |out - ref| (fp64 reference); tolerances "
              + ", ".join(f"{k} {v:g}" for k, v in sorted({x.dtype: x.tol for x in r.results}.items())),
              style="dim", highlight=False)
    for x in r.results:
        if not x.ok:
            why = x.error or (f"max abs {x.max_abs:.3g} > {x.tol:g} (rel {x.max_rel:.3g}) at "
                              + ", ".join(f"{k} {v}" for k, v in (x.worst or {}).items()))
            if x.cause:
                why += f"; matches {x.cause.split(':', 1)[0]}"
            con.print(f"[red]FAIL[/red] {markup(x.impl)} on {markup(x.case)}: {markup(why)}",
                      highlight=False)
    for a in r.ran:
        failed = [x for x in r.results if x.impl == a.name and not x.ok]
        causes = {x.cause for x in failed if x.cause}
        for cause in sorted(causes):
            n = sum(x.cause == cause for x in failed)
            con.print(f"[red]cause[/red] {escape(a.name)}: {n} of its {len(failed)} failing "
                      f"case(s) match the reference of {escape(cause)}", highlight=False)
    for a in r.adapters:
        if a.unavailable:
            con.print(f"[yellow]SKIPPED[/yellow] {escape(a.name)}: {escape(a.unavailable)}", highlight=False)
    must = [c for c in r.control if c.must_fail]
    caught = sum(c.failed for c in must)
    if r.control_caught:
        con.print(f"[green]negative control caught[/green]: a mask shifted by one key failed all "
                  f"{len(must)} edge-data cases where it differs", highlight=False)
    else:
        missed = [c.case for c in must if not c.failed]
        con.print(f"[red]negative control NOT caught[/red] ({caught}/{len(must)} cases): "
                  f"missed {markup(', '.join(missed)) or 'no case exercises it'} — nothing else "
                  "here can be trusted",
                  highlight=False)
    con.print(f"{'[green]PASS[/green]' if r.ok else '[red]FAIL[/red]'}: {r.total_seconds:.1f} s "
              f"(reference {r.reference_seconds:.1f} s, inputs {r.build_seconds:.1f} s)", highlight=False)
