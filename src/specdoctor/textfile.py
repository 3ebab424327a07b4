"""Text files a user hands over (server logs, start-up logs): read as text, a binary file refused.

A file is binary when a NUL byte appears in its first ``PROBE`` bytes: a text log never has one,
and a file of NUL bytes (a disk that was never written) is no log either.
"""

from __future__ import annotations

from pathlib import Path

from specdoctor.errors import InputError

PROBE = 4096


def is_binary(head: bytes) -> bool:
    return b"\x00" in head[:PROBE]


def read_text(path: Path, what: str = "log") -> str:
    """The file as text (undecodable bytes replaced); missing, unreadable or binary refused."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a {what}", f"pass the {what} file") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", f"pass the {what} file") from exc
    if is_binary(data):
        raise InputError(f"{path} is a binary file, not a {what}", f"pass the server's text {what}")
    return data.decode("utf-8", "replace")
