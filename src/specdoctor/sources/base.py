"""Shapes every engine source returns: windows read from logs, and readings of counters.

One module per engine format (``vllm_log``, ``prometheus``, ``sglang``, ``llamacpp``) turns the
engine's own output into these types; nothing downstream knows which engine wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile

# How many malformed lines are listed by number; the rest are only counted.
MAX_SKIPPED_EXAMPLES = 5


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
