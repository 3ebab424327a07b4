"""Build a directory once, atomically: in a temporary sibling, then renamed into place.

A crash leaves nothing half-written, and two processes racing to build the same directory keep
one copy (the first rename wins; the loser's copy is removed)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def build_dir(out: Path, fill: Callable[[Path], T], *, start_from: Path | None = None) -> T:
    """Call ``fill(tmp)`` on a fresh sibling of ``out`` (a copy of ``start_from`` if given),
    then rename it to ``out``; returns what ``fill`` returned."""
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    if start_from is None:
        tmp.mkdir(parents=True)
    else:
        shutil.copytree(start_from, tmp)
    try:
        result = fill(tmp)
        if out.exists():  # another process won the race; keep its copy
            shutil.rmtree(tmp)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result
