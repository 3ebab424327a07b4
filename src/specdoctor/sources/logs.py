"""Read log files of any supported engine: detect the engine, collect windows, total them.

vLLM logs are pre-filtered (``scan.iter_marked_text``: grep, or large binary chunks): only
lines that carry a metrics marker reach Python, in blocks, and memory stays flat. Lines in
the current V1 format are read once per distinct payload (``vllm_log.V1Table``) and added up
in bulk (``vllm_log.FastRun``): the same totals and intervals as adding the windows one by
one. The speculative method is read from the start-up lines in each file's first 8 MiB.
SGLang and llama.cpp logs go line by line through their own modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from specdoctor.acceptance.bootstrap import UnitBlocks
from specdoctor.acceptance.profile import AcceptanceProfile, ProfileSum
from specdoctor.errors import InputError
from specdoctor.sources import vllm_log
from specdoctor.sources.base import LogReading, Window
from specdoctor.sources.scan import head_lines_with, iter_marked_text

ENGINES = ("vllm", "sglang", "llamacpp")
_DETECT_BYTES = 8 << 20


@dataclass
class LogTotal:
    """What ``read_logs`` returns: every window (when kept), the last few, and the total."""

    reading: LogReading
    total: AcceptanceProfile
    window_count: int = 0
    last_windows: list[Window] = field(default_factory=list)


class _Collector:
    """Consumes windows as they stream: running total, bootstrap blocks, the last few windows,
    and (only when asked) the full list. Memory is constant unless the full list is kept."""

    def __init__(self, keep_all: bool, last: int) -> None:
        self.total = ProfileSum()
        self.blocks = UnitBlocks()
        self.last: deque[Window] = deque(maxlen=max(last, 1))
        self.all: list[Window] | None = [] if keep_all else None

    def add(self, windows: list[Window]) -> None:
        for w in windows:
            self.total.add(w.profile)
            self.blocks.add(w.profile)
            self.last.append(w)
            if self.all is not None:
                self.all.append(w)

    def add_run(self, run: vllm_log.FastRun) -> None:
        """Consecutive windows read through a table: added up in bulk, with the same result
        as ``add`` on each; only the windows kept are built."""
        ids = np.array(run.ids, dtype=np.intp)
        self.total.add(run.table.total(ids), windows=len(ids))
        rows, has_pos, unusable_after = run.table.unit_rows(ids)
        self.blocks.add_rows(rows, has_pos, unusable_after)
        keep = self.last.maxlen or 1
        if self.all is not None:
            kept = run.windows()
            self.all.extend(kept)
            self.last.extend(kept[-keep:])
        else:
            self.last.extend(run.windows(max(len(ids) - keep, 0)))

    def add_any(self, piece: list[Window] | vllm_log.FastRun) -> None:
        if isinstance(piece, vllm_log.FastRun):
            self.add_run(piece)
        else:
            self.add(piece)


def _module(engine: str) -> ModuleType:
    return importlib.import_module(f"specdoctor.sources.{engine}" if engine != "vllm"
                                   else "specdoctor.sources.vllm_log")


def detect_engine(path: Path) -> str | None:
    """The engine whose metrics lines appear first in the file's first 8 MiB."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_DETECT_BYTES).decode("utf-8", "replace")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}", "check the path") from exc
    if "\x00" in head[:4096]:
        raise InputError(f"{path} is a binary file, not a log", "pass the server's text log")
    for line in head.splitlines():
        for engine in ENGINES:
            try:
                if _module(engine).looks_like(line):
                    return engine
            except ModuleNotFoundError:
                continue
    return None


def read_logs(paths: list[Path], engine: str | None = None,
              drafter: vllm_log.DrafterKind = "auto", keep_windows: bool = True,
              last_windows: int = 20) -> LogTotal:
    """Windows of all files (in the order given) and their total.

    With ``keep_windows=False`` only the total and the last ``last_windows`` windows are kept,
    so memory does not grow with the logs (vLLM; the other engines read line by line too).
    """
    if not paths:
        raise InputError("no log file given", "pass one or more files: specdoctor logs server.log")
    for p in paths:
        if not p.exists():
            raise InputError(f"{p}: no such file", "check the path")
        if p.is_dir():
            raise InputError(f"{p} is a directory", "pass the log files inside it")
    engine = engine or _detect_all(paths)
    col = _Collector(keep_windows, last_windows)
    reading = LogReading(engine=engine)
    if engine == "vllm":
        parser = vllm_log.VllmLogParser(drafter)
        config, needle = vllm_log.CONFIG_NEEDLE.encode(), vllm_log.METRICS_NEEDLE.encode()
        for p in paths:
            # The method comes from the start-up lines at the head of each file; the windows
            # from every line the pre-filter lets through.
            for lineno, line in head_lines_with(str(p), config):
                parser.feed(str(p), lineno, line)
            for text in iter_marked_text(str(p), (needle,)):
                for piece in parser.feed_text(str(p), text):
                    col.add_any(piece)
        col.add(parser.finish())
        reading.skipped, reading.notes, reading.cumulative = parser.skipped, parser.notes, parser.cumulative
    else:
        mod = _module(engine)
        for p in paths:
            part = mod.parse_log(_lines(p), str(p))
            col.add(part.windows)
            reading.skipped.merge(part.skipped)
            reading.notes.extend(part.notes)
            reading.cumulative = reading.cumulative or part.cumulative
    reading.windows = col.all or []
    # For cumulative formats (vLLM V0) the windows are already differences of consecutive
    # lines, so their sum is the last line's totals (each restart's segment counted once).
    if col.total.n == 0:
        raise InputError(
            f"{engine} log lines found, but no speculative-decoding window in "
            f"{', '.join(map(str, paths))}",
            "speculation was off, or the server logged no stats while it ran: start it with "
            "speculative decoding and keep its stats logging on",
        )
    total = col.total.result()
    return LogTotal(reading, total.with_intervals(col.blocks.intervals()), col.total.n, list(col.last))


def _detect_all(paths: list[Path]) -> str:
    found = {p: detect_engine(p) for p in paths}
    engines = {e for e in found.values() if e}
    if not engines:
        raise InputError(
            f"no speculative-decoding metrics lines in {', '.join(map(str, paths))}",
            "is this the server's log with speculation on? vLLM prints 'SpecDecoding metrics:' "
            "every VLLM_LOG_STATS_INTERVAL s (not with --disable-log-stats); or pass --engine",
        )
    if len(engines) > 1:
        raise InputError(f"files from different engines: {sorted(engines)}",
                         "read each engine's logs separately, or force one with --engine")
    return engines.pop()


def _lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        yield from fh
