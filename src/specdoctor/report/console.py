"""Console helpers: progress on stderr (stdout stays clean for --json), shared by commands."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console


def err_console() -> Console:
    return Console(stderr=True)


@contextmanager
def progress_waiter(title: str) -> Iterator[Callable[[float, str], None]]:
    """A spinner with elapsed seconds and the server's last log line; yields the tick callback."""
    console = err_console()
    if not console.is_terminal:
        console.print(f"{title} …")
        last = [-30.0]

        def tick_plain(elapsed: float, line: str) -> None:
            if elapsed - last[0] >= 30:
                last[0] = elapsed
                console.print(f"  {elapsed:5.0f} s  {line[:100]}", highlight=False, markup=False)

        yield tick_plain
        return
    with console.status(title) as status:
        def tick(elapsed: float, line: str) -> None:
            status.update(f"{title} [dim]{elapsed:4.0f} s[/dim]  [dim]{_escape(line[:90])}[/dim]")

        yield tick


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class _ConsoleHandler(logging.Handler):
    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        self.console.print(f"  {record.getMessage()}", highlight=False, markup=False)


@contextmanager
def build_progress(logger: str = "specdoctor.lab") -> Iterator[None]:
    """Show what ``logger`` says at INFO (what is being built or trained, a line every 100
    steps) on stderr while the block runs: first builds of trained lab models take minutes."""
    handler = _ConsoleHandler(err_console())
    lg = logging.getLogger(logger)
    level, propagate = lg.level, lg.propagate
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    lg.propagate = False
    try:
        yield
    finally:
        lg.removeHandler(handler)
        lg.setLevel(level)
        lg.propagate = propagate
