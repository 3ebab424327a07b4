"""Files a user hands over (server logs, start-up logs, JSON configs, suites, datasets): read
bounded, as text, a binary file refused.

A file is binary when a NUL byte appears in its first ``PROBE`` bytes: a text log never has one,
and a file of NUL bytes (a disk that was never written) is no log either.

A file read whole is checked before it is read: it must be a regular file (a device or a
socket would never end) or a pipe (a FIFO nobody writes to reads as empty, at once, instead of
blocking), no larger than its limit — ``MAX_CONFIG`` for a JSON or TOML
file, ``MAX_TEXT`` for a log or a dataset read whole — and it is read with that bound even when
it grows meanwhile. Past the limit: bad input naming the file, its size and the limit.
Commands that can stream a log (``logs``, ``diagnose --logs``) do, with no limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from specdoctor.errors import InputError

PROBE = 4096
MAX_CONFIG = 64 << 20  # a JSON/TOML file read whole: configs, suites, references, vocab maps
MAX_TEXT = 256 << 20  # a text file read whole: a dataset, a server log an experiment reads


def is_binary(head: bytes) -> bool:
    return b"\x00" in head[:PROBE]


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def read_limited(path: Path, what: str = "file", limit: int = MAX_CONFIG,
                 flag: str | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; anything else is bad input
    (a missing path, a directory, a FIFO or device, an unreadable or larger file)."""
    name = f"{flag} {path}" if flag else str(path)
    fix = f"pass the {what}" + (f" to {flag}" if flag else "")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO without writer: no hang
    except FileNotFoundError:
        raise InputError(f"{name}: no such file", fix) from None
    except IsADirectoryError:
        raise InputError(f"{name} is a directory, not a {what}", fix) from None
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}", fix) from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{name} is a directory, not a {what}", fix)
        if stat.S_ISFIFO(st.st_mode):  # a pipe: read on until its end or the limit
            os.set_blocking(fd, True)  # a FIFO nobody writes to reads as empty, at once
        elif not stat.S_ISREG(st.st_mode):
            raise InputError(f"{name} is not a regular file or a pipe (a device or socket), "
                             f"not a {what}", f"{fix} as a regular file")
        if st.st_size > limit:
            raise InputError(f"{name} holds {mib(st.st_size)}, past the limit of {mib(limit)} "
                             f"for a {what}", f"{fix}; is this the right file?")
        parts: list[bytes] = []
        size = 0
        while size <= limit and (block := os.read(fd, min(1 << 20, limit + 1 - size))):
            parts.append(block)
            size += len(block)
        if size > limit:
            raise InputError(f"{name} grew past the limit of {mib(limit)} for a {what} while "
                             "it was read", f"{fix}; is this the right file?")
        return b"".join(parts)
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}", fix) from exc
    finally:
        os.close(fd)


def read_text(path: Path, what: str = "log", limit: int = MAX_TEXT) -> str:
    """The file as text (undecodable bytes replaced); missing, unreadable, not a regular file,
    past ``limit`` or binary refused."""
    data = read_limited(path, what, limit)
    if is_binary(data):
        raise InputError(f"{path} is a binary file, not a {what}", f"pass the server's text {what}")
    return data.decode("utf-8", "replace")
