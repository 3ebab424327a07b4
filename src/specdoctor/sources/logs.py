"""Read log inputs of any supported engine: detect the engine, collect windows, total them.

Each input (a file, or a stream such as stdin or a pipe, read once) is read on its own, by the
engine's ``Source`` (``sources.registry``) with its own method and k from its own start-up
lines: so a file's windows never depend on which files came before it. Totals add counts over
every window of every input, so they do not depend on the order the inputs are named in; the
bootstrap resamples blocks of consecutive windows that never span two inputs, taken in the
order of the inputs' names, so the intervals do not either.

An input may hold several engines' lines (a user who switched servers and appended to one
log): it is split by engine (``engine_parts``), each part read by its own engine at its own
line numbers; a stream is copied to a temporary file as it is read, so that it can be split too.
Parts or files of different engines are refused together, naming each part's lines, and read
apart with ``by_file``; nothing is read as the first engine only.

Inputs whose speculative configs differ (method, or draft length k) are refused together:
their windows measure different things. ``by_file=True`` reads them apart instead, one total
per input. Where k is a setting the windows print (vLLM's per-position list, V0's k, SGLang's
server args: ``Source.splits_on_k``), a change of k inside one input (a server restarted with
another k, its log appended to the same file or stream) splits it into segments, each read as
its own input: refused together in the same way, reported apart with ``by_file``.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from dataclasses import dataclass, field, replace

from specdoctor.acceptance.bootstrap import UnitBlocks
from specdoctor.acceptance.compare import UptimeBins
from specdoctor.acceptance.profile import AcceptanceProfile, ProfileSum
from specdoctor.errors import InputError, SpeculationOff
from specdoctor.sources.base import LAST_WINDOWS, LogReading, ReadOptions, Window
from specdoctor.sources.registry import (
    ENGINES, engine_of_line, engine_serving, markers, serving_markers, source,
)
from specdoctor.sources.base import printable
from specdoctor.sources.scan import LogInput, iter_marked_lines, open_input, spooled

__all__ = ["ENGINES", "FileLog", "LogTotal", "OnWindow", "detect_engine", "differing_config",
           "engine_parts", "read_logs", "saved_inputs", "write_parts"]


@dataclass
class FileLog:
    """One input's own reading: its config, its windows' total and what was skipped."""

    source: str
    reading: LogReading
    total: AcceptanceProfile
    window_count: int
    k: int | None
    # For a segment of an input whose k changed: the input's label, the segment's place in it
    # and the lines of its first and last window.
    input: str = ""
    segment: int = 0
    lines: tuple[int, int] | None = None
    part: int = 0  # the part of the inputs it was read from, in read order (``OnWindow``)

    def config(self) -> tuple[str | None, int | None]:
        return self.reading.method, self.k

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "method": self.reading.method, "k": self.k,
                "window_count": self.window_count, "total": self.total.to_json(),
                "lines": list(self.lines) if self.lines else None,
                "skipped_lines": self.reading.skipped.to_json(), "notes": self.reading.notes}


@dataclass
class LogTotal:
    """What ``read_logs`` returns: every window (when kept), the last few, and the total;
    ``files`` holds each input's own reading, in the order given; ``uptime`` (when asked
    for) the windows drift reads, in bounded bins (``UptimeBins``), in the order given."""

    reading: LogReading
    total: AcceptanceProfile
    window_count: int = 0
    last_windows: list[Window] = field(default_factory=list)
    files: list[FileLog] = field(default_factory=list)
    uptime: tuple[AcceptanceProfile, ...] = ()


class _Segment:
    """Consecutive windows of one input with one k: running total and bootstrap blocks."""

    def __init__(self, k: int | None = None, first: int | None = None) -> None:
        self.total = ProfileSum()
        self.blocks = UnitBlocks()
        self.k, self.first, self.last = k, first, first


# Called with each window as it is read: its part (an input, or one engine's part of one) in
# read order, its segment in that part (``FileLog.part`` and ``.segment``), the window.
OnWindow = Callable[[int, int, Window], None]


class _Collector:
    """Consumes one input's windows as they stream: running totals and bootstrap blocks of each
    segment (a new one where k changes, when ``split_on_k``), the last few windows, and (only
    when asked) the full list. Memory is constant unless the full list is kept."""

    def __init__(self, keep_all: bool, last: int, split_on_k: bool = False,
                 uptime: UptimeBins | None = None,
                 sink: Callable[[int, Window], None] | None = None) -> None:
        self.segments = [_Segment()]
        self.sink = sink
        self.split_on_k = split_on_k
        self.last: deque[Window] = deque(maxlen=max(last, 1))
        self.all: list[Window] | None = [] if keep_all else None
        self.uptime = uptime

    def add(self, windows: list[Window]) -> None:
        self.last.extend(windows)
        if self.all is not None:
            self.all.extend(windows)
        if self.uptime is not None:
            for w in windows:
                self.uptime.add(w.profile)
        if not windows:
            return
        seg = self.segments[-1]
        if seg.first is None:
            seg.first = windows[0].line
        add_total, add_block, split = seg.total.add, seg.blocks.add, self.split_on_k
        line = seg.last
        for w in windows:
            p = w.profile
            if split and p.k is not None and p.k != seg.k:
                if seg.k is None:
                    seg.k = p.k
                else:
                    seg.last = line
                    seg = _Segment(p.k, w.line)
                    self.segments.append(seg)
                    add_total, add_block = seg.total.add, seg.blocks.add
            add_total(p)
            add_block(p)
            if self.sink is not None:
                self.sink(len(self.segments) - 1, w)
            line = w.line
        seg.last = line

    __call__ = add

    def change_note(self, label: str) -> str | None:
        """Where k changes inside the input, if it does."""
        segs = self.segments
        if len(segs) < 2:
            return None
        return (f"k changes inside {label}: " + ", ".join(
            f"k={s.k} in lines {s.first}-{s.last}" for s in segs)
            + "; each part is read as its own log")


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


def read_logs(names: Sequence[str | Path], engine: str | None = None,
              drafter: str = ReadOptions.drafter, keep_windows: bool = True,
              last_windows: int = LAST_WINDOWS, *, by_file: bool = False,
              k: int | None = None, uptime: bool = False,
              on_window: OnWindow | None = None) -> LogTotal:
    """Windows of all inputs (files, "-" for stdin, pipes) and their total.

    With ``keep_windows=False`` only the totals and the last ``last_windows`` windows are kept,
    so memory does not grow with the logs; ``uptime=True`` adds the windows drift reads, in
    bounded bins (``LogTotal.uptime``); ``on_window`` is handed each window as it is read
    (to stream them somewhere, in place of keeping them). Raises InputError when the inputs' speculative
    configs differ, or their engines (files of several engines, or one file holding several
    engines' lines: ``engine_parts``), unless ``by_file`` (then ``total`` is still the sum, and
    each ``files`` entry carries its own: a part of a file read by its own engine).
    """
    if not names:
        raise InputError("no log file given",
                         "pass one or more files, or - for stdin: specdoctor logs server.log")
    labels = [str(n) for n in names]
    if len(set(labels)) != len(labels):
        raise InputError(f"the same input named twice: {', '.join(labels)}",
                         "name each log once (its windows would be counted twice)")
    _refuse_one_file_twice(labels)
    inputs = [open_input(name) for name in labels]
    for inp in inputs:
        _refuse_binary(inp)
    # a stream is copied to a temporary file as it is read: it may hold several engines
    inputs = [spooled(inp) for inp in inputs]
    parts = [part for inp in inputs for part in engine_parts(inp, engine)]
    if not any(e for _, e in parts):
        _refuse_speculation_off(inputs)
    found = _one_engine(parts, by_file)
    options = ReadOptions(drafter=drafter, k=k)
    files: list[FileLog] = []
    segments: list[_Segment] = []
    collectors: list[_Collector] = []
    changed: list[str] = []
    bins = UptimeBins() if uptime else None
    for j, (inp, name) in enumerate(parts):
        # an input with no speculative line, beside others of one engine: read as theirs
        name = name or found or ENGINES[0]
        reader = source(name)
        sink = None if on_window is None else _part_sink(on_window, j)
        col = _Collector(keep_windows, last_windows, reader.splits_on_k, bins, sink)
        part = reader.read(inp, options, col)
        label = _part_label(inp, name)
        note = col.change_note(label)
        if note:
            part.notes.append(note)
            changed.append(label)
        for i, seg in enumerate(col.segments):
            files.append(replace(_segment_log(inp, label, part, seg, i, note is not None), part=j))
            segments.append(seg)
        collectors.append(col)
    mixed = differing_config(files)
    if mixed and not by_file:
        what = (f"the speculative config changes inside {', '.join(changed)}" if changed
                else "these logs come from servers with different speculative configs")
        raise InputError(
            f"{what} ({mixed}); one total would mix different measurements",
            "read them apart: add --by-file (each file, and each part of a file with its own k, "
            "gets its own total), or run specdoctor logs once per server",
        )
    res = _combine(files, segments, collectors, last_windows)
    if bins is not None:
        res.uptime = bins.profiles()
    if mixed:
        res.reading.notes.append(f"the total adds logs of different speculative configs ({mixed}): "
                                 "read each file's own total")
    return res


def _part_sink(on_window: OnWindow, part: int) -> Callable[[int, Window], None]:
    return lambda segment, w: on_window(part, segment, w)


def engine_parts(inp: LogInput, engine: str | None = None) -> list[tuple[LogInput, str | None]]:
    """The input as parts of one engine each, with that engine (None: no speculative line).

    Most logs are one engine's: the first engine's lines are found (``detect_engine``), then
    a scan for every other engine's markers finds nothing. Where it finds some (a user who
    switched servers and appended to one log), each run of one engine's lines is a part, from
    the line after the previous run's last line (so a server's start-up lines go with its
    metrics lines) to its own last line; the last part runs to the end. ``engine`` (the user's
    --engine) reads the whole input as that engine."""
    if engine is not None:
        return [(inp, engine)]
    first = detect_engine(inp)
    if first is None or inp.path is None:
        return [(inp, first)]
    if not any(engine_of_line(line) not in (None, first)
               for _, line in iter_marked_lines(inp.path, markers(but=first))):
        return [(inp, first)]
    runs: list[list] = []  # [engine, first line, last line]
    for n, line in iter_marked_lines(inp.path, markers()):
        name = engine_of_line(line)
        if name is None:
            continue
        if runs and runs[-1][0] == name:
            runs[-1][2] = n
        else:
            runs.append([name, n, n])
    out: list[tuple[LogInput, str | None]] = []
    for i, (name, _, last) in enumerate(runs):
        start = 1 if i == 0 else runs[i - 1][2] + 1
        out.append((inp.part(start, last if i < len(runs) - 1 else None), name))
    return out


def _part_label(inp: LogInput, engine: str) -> str:
    """How a part of a file is named: its lines and its engine (the file alone: its name)."""
    if inp.lines_in is None:
        return inp.label
    first, last = inp.lines_in
    return f"{inp.label} lines {first}-{'end' if last is None else last} ({engine})"


def _refuse_one_file_twice(labels: Sequence[str]) -> None:
    """Two names of one file (a symlink, a hard link, ``../``) are the same input: its windows
    would be counted twice. Files are told apart by (device, inode)."""
    seen: dict[tuple[int, int], str] = {}
    for label in labels:
        if label == "-":
            continue
        try:
            st = os.stat(label)
        except OSError:
            continue  # open_input names what is wrong with it
        if not stat.S_ISREG(st.st_mode):
            continue
        first = seen.setdefault((st.st_dev, st.st_ino), label)
        if first != label:
            raise InputError(f"{label} and {first} are one file (a link or another path to it)",
                             "name each log once (its windows would be counted twice)")


def saved_inputs(names: Sequence[str], folder: Path) -> list[Path]:
    """The logs named on a command line as files to read as often as needed: a regular file as
    it is; a stream (- for stdin, a pipe, a process substitution) read once, as ``logs`` reads
    it, and copied into ``folder`` under its own name (stdin: ``stdin.log``). Bad names are
    refused as ``logs`` refuses them."""
    out: list[Path] = []
    for name in names:
        inp = open_input(str(name))
        if inp.path is not None:
            out.append(Path(inp.path))
            continue
        folder.mkdir(parents=True, exist_ok=True)
        stem = "stdin" if inp.label == "-" else Path(inp.label).name.removesuffix(".log")
        path = folder / f"{stem}.log"
        n = 1
        while path.exists() or path in out:
            n += 1
            path = folder / f"{stem}-{n}.log"
        with open(path, "wb") as fh:
            for block in inp.blocks():
                fh.write(block)
        out.append(path)
    return out


def write_parts(lt: LogTotal, folder: Path) -> list[tuple[str, Path]]:
    """Each part of the logs read with ``by_file`` as a file of its own, to read or diagnose on
    its own: (its name, its file). A whole input is its own file; a part of one (an engine's
    lines, or a segment with its own k) is written to ``folder`` with its lines at their own
    numbers and every other line empty: from the line after the previous part's last line (its
    server's start-up lines) to its own last line, the input's last part to the end."""
    out: list[tuple[str, Path]] = []
    by_input: dict[str, list[FileLog]] = {}
    for f in lt.files:
        by_input.setdefault(f.input, []).append(f)
    for label, fs in by_input.items():
        if len(fs) == 1 or any(f.lines is None for f in fs):
            out += [(f.source, Path(label)) for f in fs]
            continue
        folder.mkdir(parents=True, exist_ok=True)
        start = 1
        for i, f in enumerate(fs):
            assert f.lines is not None
            end = f.lines[1] if i < len(fs) - 1 else None
            path = folder / f"{Path(label).name.removesuffix('.log')}.lines-{start}-{end or 'end'}.log"
            _write_lines(Path(label), path, start, end)
            out.append((f.source, path))
            start = f.lines[1] + 1
    return out


def _write_lines(src: Path, dst: Path, first: int, last: int | None) -> None:
    """``src`` with every line outside ``first``..``last`` left empty (numbering holds)."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for n, line in enumerate(fin, 1):
            if last is not None and n > last:
                break
            fout.write(line if n >= first else b"\n")


def _segment_log(inp: LogInput, label: str, part: LogReading, seg: _Segment, i: int,
                 split: bool) -> FileLog:
    """One segment of an input as a FileLog of its own (the whole input, or the whole part of
    one engine, when not ``split``): its own method (the one named before its windows), its
    lines; the input's skipped lines and notes go with its first segment. ``input`` is the
    input's own label (its windows' ``source``), ``lines`` the lines it covers in it."""
    total = seg.total.result()
    if not split or seg.first is None or seg.last is None:
        lines = None
        if inp.lines_in is not None:
            lines = (inp.lines_in[0], inp.lines_in[1] if inp.lines_in[1] is not None
                     else max(seg.last or 0, inp.lines_in[0]))
        return FileLog(label, part, total, seg.total.n, total.k, inp.label, i, lines)
    method = part.method_at(seg.first)
    if i == 0:
        own = LogReading(part.engine, skipped=part.skipped, notes=part.notes,
                         cumulative=part.cumulative, method=method, methods=part.methods)
    else:
        own = LogReading(part.engine, cumulative=part.cumulative, method=method)
    return FileLog(f"{inp.label} lines {seg.first}-{seg.last}", own, total, seg.total.n, total.k,
                   inp.label, i, (seg.first, seg.last))


def _combine(files: list[FileLog], segments: list[_Segment], collectors: list[_Collector],
             last: int) -> LogTotal:
    engines = sorted({f.reading.engine for f in files if f.window_count} or
                     {f.reading.engine for f in files})
    engine = "+".join(engines)
    reading = LogReading(engine=engine)
    total = ProfileSum()
    inputs = {f.input for f in files}
    for col in collectors:
        reading.windows.extend(col.all or [])
    for f, seg in zip(files, segments):
        total.merge(seg.total)
        reading.skipped.merge(f.reading.skipped)
        who = f.source if len(engines) > 1 else f.input if len(inputs) > 1 else None
        reading.notes.extend(f"{who}: {n}" if who else n for n in f.reading.notes)
        reading.cumulative = reading.cumulative or f.reading.cumulative
        if len(inputs) > 1 and seg.total.n == 0:
            reading.notes.append(f"{f.source}: no speculative-decoding window")
        f.total = f.total.with_intervals(seg.blocks.intervals(), seg.blocks.unavailable("windows"))
    methods = {f.reading.method for f in files}
    reading.method = methods.pop() if len(methods) == 1 else None
    if len(files) == 1:  # counts since start add up only for one server's log
        reading.since_start = files[0].reading.since_start
    plain = sum(f.reading.plain_lines for f in files)
    if total.n == 0 and plain and not reading.skipped.count:
        raise SpeculationOff(
            f"speculation is off in {', '.join(sorted(inputs))}: {plain} {engine} decode "
            "statistics line(s) and none with an acceptance figure",
            SPEC_OFF_FIX, f"{plain} {engine} decode statistics line(s) without an acceptance "
                          "figure")
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
        order = sorted(range(len(files)), key=lambda i: (files[i].input, files[i].segment))
        blocks = UnitBlocks.joined([segments[i].blocks for i in order])
        result = result.with_intervals(blocks.intervals(), blocks.unavailable("windows"))
    last_windows = [w for col in collectors for w in col.last][-max(last, 1):]
    return LogTotal(reading, result, total.n, last_windows, files)


def differing_config(files: list[FileLog]) -> str | None:
    """How the inputs' speculative configs (engine, method, k) differ where known, if they do:
    each input with the settings that differ."""
    values = {"engine": lambda f: f.reading.engine, "method": lambda f: f.reading.method,
              "k": lambda f: f.k}
    differ = [name for name, get in values.items()
              if len({get(f) for f in files if get(f) is not None}) > 1]
    if not differ:
        return None
    return ", ".join(f"{f.source}: " + " ".join(f"{name}={values[name](f)}" for name in differ)
                     for f in files)


SPEC_OFF_FIX = ("start the server with speculative decoding (vLLM --speculative-config, SGLang "
                "--speculative-algorithm, llama-server -md or --spec-type) and keep its stats "
                "logging on")


def _refuse_speculation_off(inputs: list[LogInput]) -> None:
    """No speculative line in any input: if one shows the engine serving (its throughput lines,
    a start-up line without a speculative config), speculation was off; say so."""
    for inp in inputs:
        found: list[str] = []

        def serving(line: str) -> str | None:
            engine = engine_serving(line)
            if engine is not None:
                found.append(line)
            return engine

        engine = (next(filter(None, (serving(line) for _, line in
                                     inp.head_lines_with(*serving_markers()))), None)
                  or inp.first_past_head(serving_markers(), serving))
        if engine is not None:
            shown = _around(found[0], [m.decode() for m in serving_markers()])
            raise SpeculationOff(
                f"speculation is off in {inp.label}: it is a {engine} log that shows the server "
                f"serving ({shown!r}) and holds no speculative-decoding line",
                SPEC_OFF_FIX, f"the {engine} log shows the server serving ({shown!r}) and no "
                              "speculative-decoding line")


def _around(line: str, markers: list[str], width: int = 70) -> str:
    """The part of ``line`` around the first marker it holds, safe to show."""
    at = min((i for i in (line.find(m) for m in markers) if i >= 0), default=0)
    start = max(at - width, 0)
    return ("…" if start else "") + printable(line[start:].strip(), 2 * width)


def _one_engine(parts: list[tuple[LogInput, str | None]], by_file: bool) -> str | None:
    """The one engine of all parts; with several, InputError naming each file or part and its
    engine, unless ``by_file`` (each part is then read by its own engine: None returned)."""
    engines = {e for _, e in parts if e}
    if not engines:
        names = ", ".join(dict.fromkeys(inp.label for inp, _ in parts))
        raise InputError(
            f"no speculative-decoding metrics lines in {names}",
            "is this the server's log with speculation on? vLLM prints 'SpecDecoding metrics:' "
            "every VLLM_LOG_STATS_INTERVAL s (not with --disable-log-stats); or pass --engine",
        )
    if len(engines) == 1:
        return engines.pop()
    if by_file:
        return None
    listed = ", ".join(f"{_part_label(inp, e) if e and inp.lines_in else inp.label}: "
                       f"{e or 'none'}" for inp, e in parts)
    inside = [inp.label for inp, _ in parts if inp.lines_in is not None]
    what = (f"{', '.join(dict.fromkeys(inside))} holds the lines of several engines"
            if inside else "files from different engines")
    raise InputError(f"{what} ({listed}); one total would mix different servers",
                     "read them apart: add --by-file (each file, and each engine's part of a file, "
                     "gets its own total), split the file at those lines, or force one engine "
                     "with --engine")
