"""The CLI's one grammar: options every command spells the same way, and the one way runs are
recorded.

- lists: every list option takes repetition and commas alike (``--suite code,essay`` is
  ``--suite code --suite essay``), through ``list_option``;
- ``--json`` prints one JSON object on stdout, with one help text (``json_option``);
- ``--db`` / ``--no-store``: the store (``store_options``), its default said as ``paths`` sets it;
- ``-o/--out``: the folder a command writes into (``out_option``); ``--ready-timeout``: seconds
  a started server may take to answer (``ready_timeout_option``). Older spellings still parse
  and are no longer shown (``Aliased``);
- ``--env NAME=VALUE`` (``env_option``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from specdoctor.errors import InputError
from specdoctor.store.db import open_store

F = TypeVar("F", bound=Callable[..., Any])

JSON_HELP = "Print one JSON object on stdout."
DB_HELP = "SQLite store (default: $SPECDOCTOR_DB, else $SPECDOCTOR_HOME/specdoctor.db)."
LIST_HINT = "Repeat the flag or separate values with commas."


class Aliased(click.Option):
    """An option whose older spellings (``hidden_opts``) still parse but are not shown."""

    def __init__(self, param_decls: Sequence[str], hidden_opts: Sequence[str] = (),
                 **kwargs: Any) -> None:
        super().__init__(list(param_decls), **kwargs)
        self.hidden_opts = tuple(hidden_opts)

    def get_error_hint(self, ctx: click.Context) -> str:
        return " / ".join(f"'{o}'" for o in self.opts if o not in self.hidden_opts)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [o for o in shown if o not in self.hidden_opts]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def split_values(values: Sequence[str], kind: Callable[[str], Any] = str,
                 choices: Sequence[str] | None = None, files: bool = False) -> tuple[Any, ...]:
    """Every value of a repeated option, each also split at its commas. With ``files``, a value
    that names an existing path is kept whole (a file name may hold a comma)."""
    out = []
    for v in values:
        parts = [v] if files and Path(v).exists() else v.split(",")
        for part in (p.strip() for p in parts):
            if not part:
                continue
            if choices is not None and part not in choices:
                raise click.BadParameter(f"{part!r} is not one of {', '.join(choices)}")
            try:
                out.append(kind(part))
            except ValueError:
                name = getattr(kind, "__name__", "value")
                raise click.BadParameter(f"{part!r} is not a{'n' if name[0] in 'aeiou' else ''} "
                                         f"{name}") from None
    return tuple(out)


def list_option(*decls: str, kind: Callable[[str], Any] = str,
                choices: Sequence[str] | None = None, files: bool = False, help: str = "",
                **kwargs: Any) -> Callable[[F], F]:
    """A list option: repeated, comma-separated, or both; a tuple of ``kind`` (each in
    ``choices`` when given)."""
    def callback(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple:
        return split_values(values, kind, choices, files)

    metavar = kwargs.pop("metavar", None) or ("[" + "|".join(choices) + "],…" if choices else None)
    return click.option(*decls, multiple=True, callback=callback, metavar=metavar,
                        help=f"{help} {LIST_HINT}".strip(), **kwargs)


_ENV_SPLIT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")


def parse_env(values: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` items, repeated or comma-separated; a comma inside a value stays
    (``CUDA_VISIBLE_DEVICES=0,1,HF_HOME=/data`` is two variables)."""
    env: dict[str, str] = {}
    for v in values:
        for item in _ENV_SPLIT.split(v):
            name, sep, value = item.partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise InputError(f"--env {item!r} is not NAME=VALUE",
                                 "e.g. --env HF_HOME=/data/hf,VLLM_CACHE_ROOT=/tmp/c")
            env[name] = value
    return env


def env_option(help: str, dest: str = "env_kv") -> Callable[[F], F]:
    return click.option("--env", dest, multiple=True, metavar="NAME=VALUE",
                        help=f"{help} {LIST_HINT}")


def json_option(f: F) -> F:
    """``--json``, the same on every command."""
    return click.option("--json", "as_json", is_flag=True, help=JSON_HELP)(f)


def db_option(f: F) -> F:
    return click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None,
                        help=DB_HELP)(f)


def store_options(f: F) -> F:
    """``--db PATH`` and ``--no-store``."""
    f = click.option("--no-store", is_flag=True, help="Do not record this run in the store.")(f)
    return db_option(f)


def out_option(help: str, hidden: Sequence[str] = (), **kwargs: Any) -> Callable[[F], F]:
    """``-o/--out DIR``: the one name of the folder a command writes into."""
    return click.option("-o", "--out", *hidden, "out_dir", cls=Aliased, hidden_opts=hidden,
                        type=click.Path(file_okay=False, path_type=Path), help=help, **kwargs)


class Seconds(click.FloatRange):
    """Seconds: greater than 0, at most ``max``; ``nan`` refused (click's FloatRange lets it
    through, and a wait of nan seconds never ends)."""

    name = "seconds"

    def __init__(self, max: float | None = None) -> None:
        super().__init__(min=0, min_open=True, max=max)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        out = super().convert(value, param, ctx)
        if math.isnan(out):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return out


class Finite(click.FloatRange):
    """A number in [min, max]; ``nan`` and the infinities refused (click's FloatRange lets nan
    through: every comparison with it is false)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        out = super().convert(value, param, ctx)
        if not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return out


TEMPERATURE = Finite(min=0, max=100)  # 0: greedy; engines accept up to about 2
TOP_P = Finite(min=0, min_open=True, max=1)


def ready_timeout_option(default: float, hidden: Sequence[str] = ()) -> Callable[[F], F]:
    """``--ready-timeout S``: how long a started server may take to answer."""
    return click.option("--ready-timeout", *hidden, "ready_timeout", cls=Aliased,
                        hidden_opts=hidden, type=Seconds(max=7 * 24 * 3600),
                        default=default, show_default=True,
                        help="Seconds a started server may take to become ready; then it is "
                             "stopped and its log tail shown.")


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


def db_words(db: Path | None) -> str:
    """`` --db PATH`` for a hint's command line when the store is not the default one."""
    import shlex

    return "" if db is None else f" --db {shlex.quote(str(db))}"


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
    click.echo(f"recorded as run {run_id} (show it: specdoctor runs {run_id}{db_words(db)})",
               err=True)
    return run_id


def example(*lines: str) -> str:
    """The closing paragraph of a command's --help: command lines a user can run as they are."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)
