"""Find the few interesting lines of a huge log without reading the rest in Python.

``iter_marked_lines`` yields (line number, line) for lines containing any of the given byte
markers. It hands the scan to ``grep -F`` when the system has one (memory-speed skipping of the
noise), and otherwise reads large chunks and lets ``bytes.find`` skip it. Memory stays flat
whatever the file's size.

``iter_marked_text`` yields the same lines in blocks of ``grep -n`` text ("N:line\n" each),
decoded once per block, for readers that parse many lines per call.

``LogInput`` is one log as the user named it: a regular file (read by path, so grep can scan
it), or a stream (``-`` for stdin, a pipe, a process substitution such as ``<(docker logs c)``)
that is read exactly once, front to back: its head is kept for engine detection and the rest
streams through the same line scanner. A log whose first metrics line lies past the head (a long
preamble of health checks and access logs) is searched further: a file by grep, a stream by
reading on, the part read kept in a temporary file so that nothing is read twice or lost.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from specdoctor.errors import InputError

HEAD_BYTES = 8 << 20  # how much of a log is read to detect its engine and its start-up lines
SNIFF_BYTES = 4096    # the first bytes, as read, that say whether an input is binary
# A file's head skips at most this many lines longer than the head itself (each is read to its
# end once); past them, the head is what it has and the search goes on by grep.
MAX_SKIPPED_LONG_LINES = 4


def iter_marked_lines(path: str, wanted: tuple[bytes, ...], chunk_size: int = 1 << 24
                      ) -> Iterator[tuple[int, str]]:
    """(1-based line number, decoded line) for each line of ``path`` containing any marker."""
    grep = shutil.which("grep")
    if grep:
        yield from _grep_lines(grep, path, wanted)
    else:
        yield from _python_scan(path, wanted, chunk_size)


def iter_marked_text(path: str, wanted: tuple[bytes, ...], block_size: int = 1 << 20
                     ) -> Iterator[str]:
    """Blocks of "N:line\n" lines (1-based N) for the lines of ``path`` containing any marker.

    The lines are those of ``iter_marked_lines``; a line may keep a trailing "\r". Blocks end
    at a newline and are decoded as UTF-8 with replacement, which splits at newlines exactly as
    decoding line by line does.
    """
    grep = shutil.which("grep")
    if grep:
        yield from _grep_text(grep, path, wanted, block_size)
    else:
        for lines in _batched(_python_scan(path, wanted, block_size), 1 << 14):
            yield "".join(f"{n}:{line}\n" for n, line in lines)


def _batched(items: Iterator[tuple[int, str]], n: int) -> Iterator[list[tuple[int, str]]]:
    batch: list[tuple[int, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _grep_argv(grep: str, path: str, wanted: tuple[bytes, ...]) -> list[str]:
    argv = [grep, "-a", "-n", "-F"]
    for w in wanted:
        argv += ["-e", w.decode()]
    return argv + ["--", path]


def _grep_text(grep: str, path: str, wanted: tuple[bytes, ...], block_size: int) -> Iterator[str]:
    """grep's output in blocks of whole lines: whatever grep has written when Python asks (at
    most ``block_size`` bytes a read, at least 64 KiB a block unless grep is done), through a
    pipe widened so grep keeps scanning while Python reads the previous block."""
    proc = subprocess.Popen(_grep_argv(grep, path, wanted), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"})
    assert proc.stdout is not None
    _widen_pipe(proc.stdout.fileno(), block_size)
    least = min(block_size, 1 << 16)
    pending: list[bytes] = []
    size = 0
    try:
        while True:
            data = proc.stdout.read1(block_size)
            if data:
                pending.append(data)
                size += len(data)
                if size < least:
                    continue
            block = b"".join(pending)
            cut = block.rfind(b"\n") + 1 if data else len(block)
            if cut:
                yield _whole_lines(block[:cut])
            pending, size = ([block[cut:]], len(block) - cut) if cut < len(block) else ([], 0)
            if not data:
                break
    finally:
        failure = _finish(proc, path)
    if failure:  # raised only when the output was read to its end
        raise OSError(failure)


def _finish(proc: subprocess.Popen, path: str) -> str | None:
    """Close grep's output and wait for it; the failure, if grep failed (exit 1 only means
    that no line matched)."""
    assert proc.stdout is not None
    proc.stdout.close()
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    return f"grep failed on {path}: {err.strip()}" if proc.wait() > 1 else None


def _whole_lines(block: bytes) -> str:
    """A block of grep output as text ending with a newline (grep ends every line with one;
    kept for safety at the very end)."""
    text = block.decode("utf-8", "replace")
    return text if text.endswith("\n") else text + "\n"


def _widen_pipe(fd: int, size: int) -> None:
    """Let the pipe hold ``size`` bytes where the system allows (Linux); else leave it."""
    try:
        import fcntl

        op = getattr(fcntl, "F_SETPIPE_SZ", None)
        if op is not None:
            fcntl.fcntl(fd, op, size)
    except OSError:
        pass


def _grep_lines(grep: str, path: str, wanted: tuple[bytes, ...]) -> Iterator[tuple[int, str]]:
    proc = subprocess.Popen(_grep_argv(grep, path, wanted), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env={**os.environ, "LC_ALL": "C"}, bufsize=1 << 20)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            num, _, line = raw.partition(b":")
            yield int(num), line.rstrip(b"\r\n").decode("utf-8", "replace")
    finally:
        failure = _finish(proc, path)
    if failure:  # raised only when the output was read to its end
        raise OSError(failure)


def _python_scan(path: str, wanted: tuple[bytes, ...], chunk_size: int) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as fh:
        yield from _scan_chunks(_chunks(fh, chunk_size), wanted)


def _chunks(fh: Readable, chunk_size: int, head: bytes = b"") -> Iterator[bytes]:
    if head:
        yield head
    while True:
        block = fh.read(chunk_size)
        if not block:
            return
        yield block


def _scan_chunks(chunks: Iterator[bytes], wanted: tuple[bytes, ...]) -> Iterator[tuple[int, str]]:
    lineno = 0
    carry = b""
    for block in chunks:
        buf = carry + block
        cut = buf.rfind(b"\n")
        if cut < 0:
            carry = buf
            continue
        data, carry = buf[: cut + 1], buf[cut + 1:]
        yield from _scan(data, wanted, lineno)
        lineno += data.count(b"\n")
    if carry:
        yield from _scan(carry + b"\n", wanted, lineno)


def _scan(data: bytes, wanted: tuple[bytes, ...], lineno: int) -> Iterator[tuple[int, str]]:
    hits: list[int] = []
    for marker in wanted:
        pos = data.find(marker)
        while pos >= 0:
            hits.append(pos)
            pos = data.find(marker, pos + len(marker))
    if not hits:
        return
    hits.sort()
    counted_to, line_at = 0, lineno
    last_start = -1
    for pos in hits:
        start = data.rfind(b"\n", 0, pos) + 1
        if start == last_start:
            continue
        last_start = start
        line_at += data.count(b"\n", counted_to, start)
        counted_to = start
        end = data.find(b"\n", pos)
        yield line_at + 1, data[start:end].decode("utf-8", "replace")


class Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...


class BinaryFile(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


@dataclass
class LogInput:
    """One log named on the command line: a regular file read by path, or a stream read once.

    ``label`` names it in windows and messages ("-" for stdin). ``head`` holds the first
    ``HEAD_BYTES`` (cut at the last newline when there is more): for a stream they are already
    consumed, and ``marked_text`` and ``lines`` start from them.

    ``lines_in`` (a file only: ``part``) makes it one part of the file, lines ``first`` to
    ``last`` (``last`` None: to the end): its readers see those lines at their own numbers and
    nothing else (``lines`` gives the others as empty lines, so numbering holds).
    """

    label: str
    path: str | None
    stream: Readable | None = None
    _head: bytes | None = field(default=None, repr=False)
    _sniff: bytes | None = field(default=None, repr=False)
    lines_in: tuple[int, int | None] | None = None
    # what keeps a stream's temporary copy alive while the input is read (``spooled``)
    _keep: object = field(default=None, repr=False, compare=False)

    def part(self, first: int, last: int | None) -> LogInput:
        """Lines ``first`` to ``last`` of this file, read as an input of their own."""
        assert self.path is not None, "a stream is spooled to a file before it is split"
        return LogInput(self.label, self.path, _head=self._head, _sniff=self._sniff,
                        lines_in=(first, last), _keep=self._keep)

    def _in_part(self, n: int) -> bool:
        if self.lines_in is None:
            return True
        first, last = self.lines_in
        return n >= first and (last is None or n <= last)

    @property
    def head(self) -> bytes:
        if self._head is None:
            assert self.path is not None
            with open(self.path, "rb") as fh:
                self._head = _file_head(fh, HEAD_BYTES)
        return self._head

    @property
    def is_binary(self) -> bool:
        """A NUL byte among the first bytes as read (before any cut at a newline)."""
        if self._sniff is None:
            assert self.path is not None
            with open(self.path, "rb") as fh:
                self._sniff = fh.read(SNIFF_BYTES)
        return b"\x00" in self._sniff

    def first_past_head(self, wanted: tuple[bytes, ...], accept: Callable[[str], str | None]
                        ) -> str | None:
        """The first ``accept(line)`` that is not None over the lines containing a marker,
        searched past the head (a file: the whole file by grep; a stream: read on until one is
        found or the stream ends, the part read kept in a temporary file that ``lines`` and
        ``marked_text`` read before the rest)."""
        if self.path is not None:
            for _, line in iter_marked_lines(self.path, wanted):
                found = accept(line)
                if found is not None:
                    return found
            return None
        assert self.stream is not None
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - read back below, closed at exit
        found = _read_ahead(self.stream, spool, wanted, accept)
        spool.seek(0)
        self.stream = _Chain([spool, self.stream])
        return found

    def head_lines_with(self, *needles: bytes) -> Iterator[tuple[int, str]]:
        """(line number, line) of the head's lines containing any of ``needles``, in order."""
        yield from ((n, line) for n, line in _scan(self.head, needles, 0) if self._in_part(n))

    def marked_text(self, wanted: tuple[bytes, ...]) -> Iterator[str]:
        """``iter_marked_text`` of the whole input (for a stream: head, then the rest)."""
        if self.path is not None:
            if self.lines_in is None:
                yield from iter_marked_text(self.path, wanted)
                return
            for text in iter_marked_text(self.path, wanted):
                kept = [t for t in text.split("\n")[:-1]
                        if self._in_part(int(t.partition(":")[0]))]
                if kept:
                    yield "\n".join(kept) + "\n"
            return
        assert self.stream is not None
        lines = _scan_chunks(_chunks(self.stream, 1 << 20, self.head), wanted)
        for batch in _batched(lines, 1 << 14):
            yield "".join(f"{n}:{line}\n" for n, line in batch)

    def blocks(self) -> Iterator[bytes]:
        """The whole input as it is, in blocks (a stream: head, then the rest, read once)."""
        if self.path is not None:
            with open(self.path, "rb") as fh:
                yield from _chunks(fh, 1 << 20)
            return
        assert self.stream is not None
        yield from _chunks(self.stream, 1 << 20, self.head)

    def lines(self) -> Iterator[str]:
        """Every line, decoded as UTF-8 with replacement (of a part: the lines outside it as
        empty lines)."""
        if self.path is not None:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                if self.lines_in is None:
                    yield from fh
                    return
                for n, line in enumerate(fh, 1):
                    if self._in_part(n):
                        yield line
                    elif self.lines_in[1] is not None and n > self.lines_in[1]:
                        return
                    else:
                        yield "\n"
            return
        assert self.stream is not None
        carry = b""
        for block in _chunks(self.stream, 1 << 20, self.head):
            buf = carry + block
            cut = buf.rfind(b"\n") + 1
            if cut:
                yield from buf[:cut].decode("utf-8", "replace").splitlines(keepends=True)
            carry = buf[cut:]
        if carry:
            yield carry.decode("utf-8", "replace")


def spooled(inp: LogInput) -> LogInput:
    """A stream copied, as it is read, into a temporary file that is read in its place (so it
    can be scanned more than once: for the engines it holds, then by each engine's reader); a
    file as it is. The copy lives as long as the returned input."""
    if inp.path is not None:
        return inp
    tmp = tempfile.NamedTemporaryFile(prefix="specdoctor-stream-", suffix=".log")  # noqa: SIM115
    for block in inp.blocks():
        tmp.write(block)
    tmp.flush()
    return LogInput(inp.label, tmp.name, _sniff=inp._sniff, _keep=tmp)


def _whole_head(head: bytes, limit: int) -> bytes:
    return head[: head.rfind(b"\n") + 1] if len(head) >= limit else head


def _file_head(fh: BinaryFile, limit: int) -> bytes:
    """The whole lines of a file's first ``limit`` bytes. A first line longer than ``limit`` is
    skipped (its newline kept, so that line numbers hold) and the head goes on after it: the
    start-up lines and the first metrics lines come after such a line, not inside it."""
    skipped = 0
    while True:
        data = fh.read(limit)
        if len(data) < limit:
            return b"\n" * skipped + data   # the file ends inside the head
        cut = data.rfind(b"\n") + 1
        if cut or skipped == MAX_SKIPPED_LONG_LINES:
            return b"\n" * skipped + data[:cut]
        if not _skip_line(fh):
            return b"\n" * skipped
        skipped += 1


def _skip_line(fh: BinaryFile) -> bool:
    """Move past the end of the current line; False when the file ends first."""
    while True:
        block = fh.read(1 << 20)
        if not block:
            return False
        nl = block.find(b"\n")
        if nl >= 0:
            fh.seek(nl + 1 - len(block), os.SEEK_CUR)
            return True


def _read_ahead(stream: Readable, spool: Writable, wanted: tuple[bytes, ...],
                accept: Callable[[str], str | None]) -> str | None:
    """Read ``stream`` on into ``spool`` until a marked line is accepted (or the stream ends);
    the accepted value, else None."""
    carry = b""
    while True:
        block = stream.read(1 << 20)
        if not block:
            break
        spool.write(block)
        buf = carry + block
        cut = buf.rfind(b"\n") + 1
        data, carry = buf[:cut], buf[cut:]
        for _, line in _scan(data, wanted, 0):
            found = accept(line)
            if found is not None:
                return found
    for _, line in _scan(carry + b"\n", wanted, 0) if carry else ():
        found = accept(line)
        if found is not None:
            return found
    return None


def open_input(name: str) -> LogInput:
    """The log called ``name``: "-" is stdin; a pipe, FIFO or ``/dev/fd/N`` is a stream."""
    if name == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("- reads the log from stdin, but stdin is a terminal",
                             "pipe the log in: docker logs CONTAINER 2>&1 | specdoctor logs -")
        return _stream_input("-", sys.stdin.buffer)
    try:
        st = os.stat(name)
    except FileNotFoundError as exc:
        raise InputError(f"{name}: no such file",
                         "check the path, or pass - to read the log from stdin") from exc
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}", "check the path") from exc
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name} is a directory", "pass the log files inside it")
    if stat.S_ISREG(st.st_mode):
        return LogInput(name, name)
    return _stream_input(name, _open_stream(name))


def _open_stream(name: str) -> Readable:
    """A pipe, FIFO or device opened without blocking on a FIFO that has no writer (it then
    reads as empty, at once, where ``open`` would wait for a writer for ever)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        return open(fd, "rb")  # noqa: SIM115  (a stream: closed when the process ends)
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}", "check the path") from exc


def _stream_input(label: str, fh: Readable) -> LogInput:
    """A stream whose head is read now (a pipe returns what it has: read until full or EOF)."""
    parts: list[bytes] = []
    size = 0
    while size < HEAD_BYTES:
        data = fh.read(HEAD_BYTES - size)
        if not data:
            break
        parts.append(data)
        size += len(data)
    head = b"".join(parts)
    cut = _whole_head(head, HEAD_BYTES)
    return LogInput(label, None, _Prefixed(head[len(cut):], fh), cut, head[:SNIFF_BYTES])


class _Prefixed:
    """A binary stream that first returns ``prefix`` (the part of the head after its last
    newline), then the rest of ``fh``."""

    def __init__(self, prefix: bytes, fh: Readable) -> None:
        self.prefix, self.fh = prefix, fh

    def read(self, n: int = -1) -> bytes:
        if self.prefix:
            out, self.prefix = self.prefix, b""
            return out
        return self.fh.read(n)


class _Chain:
    """Binary streams read one after the other."""

    def __init__(self, parts: list[Readable]) -> None:
        self.parts = parts

    def read(self, n: int = -1) -> bytes:
        while self.parts:
            data = self.parts[0].read(n)
            if data:
                return data
            self.parts.pop(0)
        return b""
