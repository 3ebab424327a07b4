"""Options shared by the commands that record runs, and the one way they record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from specdoctor.store.db import open_store

F = TypeVar("F", bound=Callable[..., Any])


def store_options(f: F) -> F:
    """``--db PATH`` and ``--no-store``."""
    f = click.option("--no-store", is_flag=True, help="Do not record this run in the store.")(f)
    f = click.option("--db", type=click.Path(path_type=Path), default=None,
                     help="SQLite store (default $SPECDOCTOR_DB or "
                          "~/.cache/specdoctor/specdoctor.db).")(f)
    return f


def _check_svg(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    # Checked before any work, so a wrong suffix never costs a long read or a measurement.
    if value is not None and value.suffix.lower() not in (".svg", ".png"):
        raise click.BadParameter(f"writes SVG or PNG, not {value.suffix or 'a file without suffix'}: "
                                 "pass a path ending in .svg or .png", ctx=ctx, param=param)
    return value


def plot_option(f: F) -> F:
    """``--plot PATH.svg|.png``: the per-position acceptance curve."""
    return click.option("--plot", type=click.Path(path_type=Path, dir_okay=False), default=None,
                        callback=_check_svg,
                        help="Also write the per-position acceptance curve to this .svg or .png file.")(f)


def record(db: Path | None, no_store: bool, **run: Any) -> int | None:
    """Write one run (see ``Store.add_run``) unless --no-store; returns its id, which it also
    prints on stderr (every stored run is announced, whatever the command and output mode)."""
    if no_store:
        return None
    store = open_store(db)
    try:
        run_id = store.add_run(**run)
    finally:
        store.close()
    click.echo(f"recorded as run {run_id} (show it: specdoctor runs {run_id})", err=True)
    return run_id
