"""Where specdoctor keeps its files. One place, overridable by environment.

- ``SPECDOCTOR_HOME`` (default ``~/.cache/specdoctor``): lab models, lab server state and logs.
- ``SPECDOCTOR_DB`` (default ``$SPECDOCTOR_HOME/specdoctor.db``): the SQLite store of runs.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    env = os.environ.get("SPECDOCTOR_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specdoctor"


def default_db() -> Path:
    env = os.environ.get("SPECDOCTOR_DB")
    return Path(env).expanduser() if env else home() / "specdoctor.db"


def lab_dir() -> Path:
    return home() / "lab"
