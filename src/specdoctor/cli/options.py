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


def record(db: Path | None, no_store: bool, **run: Any) -> int | None:
    """Write one run (see ``Store.add_run``) unless --no-store; returns its id."""
    if no_store:
        return None
    store = open_store(db)
    try:
        return store.add_run(**run)
    finally:
        store.close()
