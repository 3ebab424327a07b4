"""Where specdoctor keeps its files. One place, overridable by environment.

- ``SPECDOCTOR_HOME`` (default ``~/.cache/specdoctor``): lab server state and logs, the lab's
  compile caches and training corpus.
- ``SPECDOCTOR_MODELS`` (default ``$SPECDOCTOR_HOME/lab/models``): the lab's built models.
  Every model directory in it is built once, atomically, and never changed afterwards, so
  several homes (one per test, one per user) can share one models cache.
- ``SPECDOCTOR_DB`` (default ``$SPECDOCTOR_HOME/specdoctor.db``): the SQLite store of runs.
"""

from __future__ import annotations

import os
from pathlib import Path


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def home() -> Path:
    return _env_path("SPECDOCTOR_HOME") or Path.home() / ".cache" / "specdoctor"


def default_db() -> Path:
    return _env_path("SPECDOCTOR_DB") or home() / "specdoctor.db"


def lab_dir() -> Path:
    return home() / "lab"


def models_dir() -> Path:
    return _env_path("SPECDOCTOR_MODELS") or lab_dir() / "models"
