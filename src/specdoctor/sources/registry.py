"""The engines specdoctor reads, by name: each module's ``SOURCE`` (a ``base.Source``).

Adding an engine is adding its module and one entry here; nothing else dispatches on names.
The modules are imported when first used, so a command that only names the engines (its
``--engine`` choices, ``--help``) does not load their parsers, and ``--engine NAME`` loads one.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

from specdoctor.errors import InputError

if TYPE_CHECKING:
    from specdoctor.sources.base import Source

# engine name -> the module of specdoctor.sources that reads its output (it exports ``SOURCE``)
_MODULES = {"vllm": "vllm_log", "sglang": "sglang", "llamacpp": "llamacpp"}
ENGINES = tuple(_MODULES)


def source(name: str) -> Source:
    module = _MODULES.get(name)
    if module is None:
        raise InputError(f"unknown engine {name!r}", f"pass one of {', '.join(ENGINES)}")
    src: Source = importlib.import_module(f"specdoctor.sources.{module}").SOURCE
    return src


@cache
def _all() -> tuple[Source, ...]:
    return tuple(source(name) for name in ENGINES)


def __getattr__(name: str) -> Any:
    if name == "SOURCES":  # every engine's source by name (imports them all)
        return {s.name: s for s in _all()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def engine_of_line(line: str) -> str | None:
    """The engine whose speculative-decoding lines look like this line, if any."""
    for s in _all():
        if s.looks_like(line):
            return s.name
    return None


def engine_serving(line: str) -> str | None:
    """The engine whose serving lines (``Source.serving_markers``) look like this line."""
    for s in _all():
        if any(m in line for m in s.serving_markers):
            return s.name
    return None


def serving_markers() -> tuple[bytes, ...]:
    return tuple(m.encode() for s in _all() for m in s.serving_markers)


def markers(but: str | None = None) -> tuple[bytes, ...]:
    """Every engine's line markers (``Source.markers``), as bytes for a scanner; ``but``: those
    of every engine but this one."""
    return tuple(m.encode() for s in _all() if s.name != but for m in s.markers)


def engine_of_metrics(text: str) -> str | None:
    """The engine whose spec-decode metric names appear first in a /metrics body; failing
    that, the one engine whose metric namespace (``vllm:``…) the body uses."""
    best: tuple[int, str] | None = None
    for s in _all():
        for prefix in s.metrics_prefixes:
            at = text.find(prefix)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, s.name)
    if best:
        return best[1]
    # No spec-decode metric: the engine whose namespace the body uses, if one does (its reader
    # then says what is missing and how to turn it on).
    found = [s.name for s in _all() if f"{s.name}:" in text]
    return found[0] if len(found) == 1 else None
