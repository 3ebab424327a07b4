"""Shapes every engine source returns: windows read from logs, and readings of counters.

One module per engine format (``vllm_log``, ``prometheus``, ``sglang``, ``llamacpp``) turns the
engine's own output into these types; nothing downstream knows which engine wrote them.

``Source`` declares what an engine module offers (detect its log lines, read one log input,
read a /metrics body); each engine module exports one as ``SOURCE`` and ``sources.registry``
lists them. Readers hand their windows to a sink as they go, a list at a time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from specdoctor.acceptance.profile import AcceptanceProfile

if TYPE_CHECKING:
    from specdoctor.sources.scan import LogInput

# How many malformed lines are listed by number; the rest are only counted.
MAX_SKIPPED_EXAMPLES = 5


_HUGE_NUMBER = re.compile(r"\d{19}")


def huge_number(line: str) -> str | None:
    """Why a metrics line cannot be read when it holds a run of 19 digits or more (a count
    past 10**18, which no server prints: the line is damaged or hostile, and converting a
    number of millions of digits would take minutes), else None."""
    m = _HUGE_NUMBER.search(line)
    if m is None:
        return None
    end = m.end()
    while end < len(line) and line[end].isdigit():
        end += 1
    return f"a number of {end - m.start():,} digits (more than 18)"


def printable(text: str, limit: int = 120) -> str:
    """Text from the user's input made safe to show: control and undecodable characters
    escaped, cut to ``limit`` characters."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return out + ("…" if len(text) > limit else "")


def count_of(value: float, what: str) -> int:
    """A counter sample as a count; InputError when it is negative, not finite or not whole."""
    from specdoctor.errors import InputError

    if not math.isfinite(value) or value < 0 or value != int(value):
        raise InputError(f"{printable(what)} = {value!r} is not a count",
                         "pass the /metrics body unchanged, as the server wrote it")
    return int(value)


@dataclass(frozen=True)
class Window:
    """One metrics line of a log: the counters of the interval since the previous line."""

    engine: str
    source: str
    line: int
    profile: AcceptanceProfile
    timestamp: str | None = None
    printed: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "line": self.line,
            "timestamp": self.timestamp,
            "printed": self.printed,
            **self.profile.to_json(),
        }


@dataclass
class SkippedLines:
    """Lines that looked like metrics but could not be read: counted, first few kept."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, source: str, line: int, reason: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_SKIPPED_EXAMPLES:
            self.examples.append(f"{source}:{line}: {reason}")

    def merge(self, other: SkippedLines) -> None:
        self.count += other.count
        room = MAX_SKIPPED_EXAMPLES - len(self.examples)
        self.examples.extend(other.examples[: max(room, 0)])

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "first": list(self.examples)}


@dataclass
class LogReading:
    """Everything one engine's parser got out of one or more log files."""

    engine: str
    windows: list[Window] = field(default_factory=list)
    skipped: SkippedLines = field(default_factory=SkippedLines)
    notes: list[str] = field(default_factory=list)
    # For cumulative formats (vLLM V0): the windows are differences of consecutive lines and
    # the total is the last line (or last minus first), never a sum of lines.
    cumulative: bool = False
    # The speculative method named by the log's start-up lines, when it names one (the last
    # one, when they name several), and each with the line from which it counts.
    method: str | None = None
    methods: list[tuple[int, str]] = field(default_factory=list)
    # Lines that show the engine serving without speculation (SGLang's Decode batch lines
    # without an acceptance length): with no window, the sign that speculation was off.
    plain_lines: int = 0
    # Counts since the server started that the windows do not hold (llama-server's statistics
    # lines beside per-request lines that print no draft count): never added to the windows.
    since_start: AcceptanceProfile | None = None

    def method_at(self, line: int) -> str | None:
        """The method in effect at a line (the first named, for lines before any)."""
        found = self.methods[0][1] if self.methods else self.method
        for at, method in self.methods:
            if at <= line:
                found = method
        return found


WindowSink = Callable[[list[Window]], None]


# vLLM: drafts of a fixed length k, of varying length (ngram), or read from the start-up lines
DRAFTERS = ("auto", "fixed", "variable")
LAST_WINDOWS = 20  # windows a reading keeps (and a table shows) unless asked for more


@dataclass(frozen=True)
class ReadOptions:
    """What a user may tell a reader that the log does not say."""

    drafter: str = "auto"  # one of DRAFTERS
    k: int | None = None  # SGLang: draft tokens per step when no server_args line is logged


class Source(Protocol):
    """One engine's reader: what ``sources.logs`` and ``specdoctor metrics`` call."""

    name: str
    # Metric name prefixes that only this engine's /metrics body carries.
    metrics_prefixes: tuple[str, ...]
    # Substrings of which every line ``looks_like`` accepts holds one: what a scanner of a
    # huge log looks for before asking ``looks_like``.
    markers: tuple[str, ...]
    # Whether a window's k is the server's setting (a change of k inside one log is then a
    # restart with another config), not just the longest draft it printed.
    splits_on_k: bool
    # Substrings of the lines this engine writes while it serves, with speculation or without
    # (its throughput statistics): with no speculative line anywhere, speculation was off.
    serving_markers: tuple[str, ...]

    def looks_like(self, line: str) -> bool:
        """Whether a log line is one of this engine's speculative-decoding lines."""
        ...

    def read(self, inp: LogInput, options: ReadOptions, sink: WindowSink) -> LogReading:
        """Read one input once, front to back; windows go to ``sink`` in order, and the
        returned reading carries the rest (skipped lines, notes, method), no windows."""
        ...

    def profile_from_prometheus(self, text: str) -> AcceptanceProfile:
        """The cumulative profile of one /metrics body (InputError when it has none)."""
        ...


@dataclass(frozen=True)
class LineSource:
    """A ``Source`` for formats read line by line in Python (small logs: SGLang, llama.cpp)."""

    name: str
    metrics_prefixes: tuple[str, ...]
    markers: tuple[str, ...]
    looks_like: Callable[[str], bool]
    parse_log: Callable[[Iterable[str], str, ReadOptions], LogReading]
    profile_from_prometheus: Callable[[str], AcceptanceProfile]
    splits_on_k: bool = False
    serving_markers: tuple[str, ...] = ()

    def read(self, inp: LogInput, options: ReadOptions, sink: WindowSink) -> LogReading:
        reading = self.parse_log(inp.lines(), inp.label, options)
        sink(reading.windows)
        reading.windows = []
        return reading
