"""Console helpers: progress on stderr (stdout stays clean for --json), shared by commands."""

from __future__ import annotations

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
