"""The engines specdoctor reads, by name: each module's ``SOURCE`` (a ``base.Source``).

Adding an engine is adding its module and one entry here; nothing else dispatches on names.
"""

from __future__ import annotations

from specdoctor.errors import InputError
from specdoctor.sources import llamacpp, sglang, vllm_log
from specdoctor.sources.base import Source

SOURCES: dict[str, Source] = {s.name: s for s in (vllm_log.SOURCE, sglang.SOURCE, llamacpp.SOURCE)}
ENGINES = tuple(SOURCES)


def source(name: str) -> Source:
    try:
        return SOURCES[name]
    except KeyError:
        raise InputError(f"unknown engine {name!r}", f"pass one of {', '.join(ENGINES)}") from None


def engine_of_line(line: str) -> str | None:
    """The engine whose speculative-decoding lines look like this line, if any."""
    for s in SOURCES.values():
        if s.looks_like(line):
            return s.name
    return None


def engine_of_metrics(text: str) -> str | None:
    """The engine whose spec-decode metric names appear first in a /metrics body; failing
    that, the one engine whose metric namespace (``vllm:``…) the body uses."""
    best: tuple[int, str] | None = None
    for s in SOURCES.values():
        for prefix in s.metrics_prefixes:
            at = text.find(prefix)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, s.name)
    if best:
        return best[1]
    # No spec-decode metric: the engine whose namespace the body uses, if one does (its reader
    # then says what is missing and how to turn it on).
    found = [s.name for s in SOURCES.values() if f"{s.name}:" in text]
    return found[0] if len(found) == 1 else None
