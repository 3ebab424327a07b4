"""Read log inputs of any supported engine: detect the engine, collect windows, total them.

Each input (a file, or a stream such as stdin or a pipe, read once) is read on its own, by the
engine's ``Source`` (``sources.registry``) with its own method and k from its own start-up
lines: so a file's windows never depend on which files came before it. Totals add counts over
every window of every input, so they do not depend on the order the inputs are named in; the
bootstrap resamples blocks of consecutive windows that never span two inputs, taken in the
order of the inputs' names, so the intervals do not either.

Inputs whose speculative configs differ (method, or draft length k) are refused together:
their windows measure different things. ``by_file=True`` reads them apart instead, one total
per input.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from dataclasses import dataclass, field

from specdoctor.acceptance.bootstrap import UnitBlocks
from specdoctor.acceptance.profile import AcceptanceProfile, ProfileSum
from specdoctor.errors import InputError
from specdoctor.sources.base import LogReading, ReadOptions, Window
from specdoctor.sources.registry import ENGINES, engine_of_line, markers, source
from specdoctor.sources.scan import LogInput, open_input

__all__ = ["ENGINES", "FileLog", "LogTotal", "detect_engine", "read_logs"]


@dataclass
class FileLog:
    """One input's own reading: its config, its windows' total and what was skipped."""

    source: str
    reading: LogReading
    total: AcceptanceProfile
    window_count: int
    k: int | None

    def config(self) -> tuple[str | None, int | None]:
        return self.reading.method, self.k

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "method": self.reading.method, "k": self.k,
                "window_count": self.window_count, "total": self.total.to_json(),
                "skipped_lines": self.reading.skipped.to_json(), "notes": self.reading.notes}


@dataclass
class LogTotal:
    """What ``read_logs`` returns: every window (when kept), the last few, and the total;
    ``files`` holds each input's own reading, in the order given."""

    reading: LogReading
    total: AcceptanceProfile
    window_count: int = 0
    last_windows: list[Window] = field(default_factory=list)
    files: list[FileLog] = field(default_factory=list)


class _Collector:
    """Consumes one input's windows as they stream: running total, bootstrap blocks, the last
    few windows, and (only when asked) the full list. Memory is constant unless the full list
    is kept."""

    def __init__(self, keep_all: bool, last: int) -> None:
        self.total = ProfileSum()
        self.blocks = UnitBlocks()
        self.last: deque[Window] = deque(maxlen=max(last, 1))
        self.all: list[Window] | None = [] if keep_all else None

    def add(self, windows: list[Window]) -> None:
        add_total, add_block = self.total.add, self.blocks.add
        for w in windows:
            add_total(w.profile)
            add_block(w.profile)
        self.last.extend(windows)
        if self.all is not None:
            self.all.extend(windows)

    __call__ = add


def detect_engine(inp: LogInput) -> str | None:
    """The engine whose metrics line comes first: in the input's head (first 8 MiB), else
    further on (past a long preamble of other lines, or past lines longer than the head)."""
    return _engine_in(inp.head) or inp.first_past_head(markers(), engine_of_line)


def _refuse_binary(inp: LogInput) -> None:
    if inp.is_binary:
        raise InputError(f"{inp.label} is a binary file (it holds NUL bytes), not a log",
                         "pass the server's text log")


def _engine_in(head: bytes) -> str | None:
    start = 0
    while start < len(head):  # a piece at a time: the first metrics line is usually early
        end = head.find(b"\n", start + (1 << 16))
        end = len(head) if end < 0 else end + 1
        for line in head[start:end].decode("utf-8", "replace").splitlines():
            engine = engine_of_line(line)
            if engine:
                return engine
        start = end
    return None


def read_logs(names: Sequence[str | Path], engine: str | None = None, drafter: str = "auto",
              keep_windows: bool = True, last_windows: int = 20, *, by_file: bool = False,
              k: int | None = None) -> LogTotal:
    """Windows of all inputs (files, "-" for stdin, pipes) and their total.

    With ``keep_windows=False`` only the totals and the last ``last_windows`` windows are kept,
    so memory does not grow with the logs. Raises InputError when the inputs' speculative
    configs differ, unless ``by_file`` (then ``total`` is still the sum, and each ``files``
    entry carries its own).
    """
    if not names:
        raise InputError("no log file given",
                         "pass one or more files, or - for stdin: specdoctor logs server.log")
    labels = [str(n) for n in names]
    if len(set(labels)) != len(labels):
        raise InputError(f"the same input named twice: {', '.join(labels)}",
                         "name each log once (its windows would be counted twice)")
    inputs = [open_input(name) for name in labels]
    for inp in inputs:
        _refuse_binary(inp)
    engines = {inp.label: engine or detect_engine(inp) for inp in inputs}
    engine = engine or _one_engine(engines)
    reader = source(engine)
    options = ReadOptions(drafter=drafter, k=k)
    files: list[FileLog] = []
    collectors: list[_Collector] = []
    for inp in inputs:
        col = _Collector(keep_windows, last_windows)
        part = reader.read(inp, options, col)
        part_total = col.total.result()
        files.append(FileLog(inp.label, part, part_total, col.total.n, part_total.k))
        collectors.append(col)
    mixed = _differing_config(files)
    if mixed and not by_file:
        raise InputError(
            f"these logs come from servers with different speculative configs ({mixed}); "
            "one total would mix different measurements",
            "read them apart: add --by-file, or run specdoctor logs once per server",
        )
    res = _combine(engine, files, collectors, last_windows)
    if mixed:
        res.reading.notes.append(f"the total adds logs of different speculative configs ({mixed}): "
                                 "read each file's own total")
    return res


def _combine(engine: str, files: list[FileLog], collectors: list[_Collector], last: int
             ) -> LogTotal:
    reading = LogReading(engine=engine)
    total = ProfileSum()
    for f, col in zip(files, collectors):
        total.merge(col.total)
        reading.skipped.merge(f.reading.skipped)
        reading.notes.extend(f"{f.source}: {n}" if len(files) > 1 else n for n in f.reading.notes)
        reading.cumulative = reading.cumulative or f.reading.cumulative
        reading.windows.extend(col.all or [])
        if len(files) > 1 and col.total.n == 0:
            reading.notes.append(f"{f.source}: no speculative-decoding window")
        f.total = f.total.with_intervals(col.blocks.intervals(), col.blocks.unavailable("windows"))
    methods = {f.reading.method for f in files}
    reading.method = methods.pop() if len(methods) == 1 else None
    if total.n == 0:
        raise InputError(
            f"{engine} log lines found, but no speculative-decoding window in "
            f"{', '.join(f.source for f in files)}"
            + (f" ({reading.skipped.count} malformed metrics line(s) skipped: "
               + "; ".join(reading.skipped.examples) + ")" if reading.skipped.count else ""),
            "speculation was off, or the server logged no stats while it ran: start it with "
            "speculative decoding and keep its stats logging on",
        )
    result = total.result()
    if len(files) == 1:  # the file's own intervals
        result = result.with_intervals(files[0].total.intervals, files[0].total.intervals_unavailable)
    else:
        order = sorted(range(len(files)), key=lambda i: files[i].source)
        blocks = UnitBlocks.joined([collectors[i].blocks for i in order])
        result = result.with_intervals(blocks.intervals(), blocks.unavailable("windows"))
    last_windows = [w for col in collectors for w in col.last][-max(last, 1):]
    return LogTotal(reading, result, total.n, last_windows, files)


def _differing_config(files: list[FileLog]) -> str | None:
    """How the inputs' speculative configs (method, k) differ where both are known, if they do."""
    for attr, what in ((lambda f: f.reading.method, "method"), (lambda f: f.k, "k")):
        seen = {f.source: attr(f) for f in files if attr(f) is not None}
        if len(set(seen.values())) > 1:
            return ", ".join(f"{s}: {what}={v}" for s, v in seen.items())
    return None


def _one_engine(found: dict[str, str | None]) -> str:
    engines = {e for e in found.values() if e}
    if not engines:
        raise InputError(
            f"no speculative-decoding metrics lines in {', '.join(found)}",
            "is this the server's log with speculation on? vLLM prints 'SpecDecoding metrics:' "
            "every VLLM_LOG_STATS_INTERVAL s (not with --disable-log-stats); or pass --engine",
        )
    if len(engines) > 1:
        listed = ", ".join(f"{s}: {e or 'none'}" for s, e in found.items())
        raise InputError(f"files from different engines ({listed})",
                         "read each engine's logs separately, or force one with --engine")
    return engines.pop()
