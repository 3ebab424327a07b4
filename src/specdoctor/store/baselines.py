"""Named gate baselines in the store: ``specdoctor gate --save NAME [RUN_ID]`` writes one,
``--baseline NAME`` and ``--export NAME FILE`` read it.

One table, ``gate_baselines``, in the same SQLite file as the runs (``--db``). Saving a name
again adds a new version and keeps the old ones (nothing is overwritten); a name resolves to
its latest version. Each row holds the baseline's whole JSON document (``gate.baseline``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.store.db import connect, guarded, load_json, row_time

SCHEMA = """
CREATE TABLE IF NOT EXISTS gate_baselines (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    name     TEXT NOT NULL,
    saved_at REAL NOT NULL,
    doc      TEXT NOT NULL          -- JSON: the baseline document (gate.baseline)
);
CREATE INDEX IF NOT EXISTS gate_baselines_name ON gate_baselines (name, id);
"""


@dataclass(frozen=True)
class SavedBaseline:
    id: int
    name: str
    saved_at: float
    doc: dict[str, Any]


class BaselineStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = connect(path, SCHEMA)

    def close(self) -> None:
        self._conn.close()

    @guarded
    def save(self, name: str, doc: dict[str, Any]) -> int:
        with self._conn:
            cur = self._conn.execute(
                "INSERT INTO gate_baselines (name, saved_at, doc) VALUES (?,?,?)",
                (name, time.time(), json.dumps(doc)))
        return int(cur.lastrowid or 0)

    @guarded
    def get(self, name: str) -> SavedBaseline:
        r = self._conn.execute("SELECT id, name, saved_at, doc FROM gate_baselines WHERE name = ?"
                               " ORDER BY id DESC LIMIT 1", (name,)).fetchone()
        if r is None:
            known = ", ".join(self.names()) or "none yet"
            raise InputError(f"no gate baseline named {name!r} in {self.path} (saved: {known})",
                             "save one with: specdoctor gate --save NAME RUN_ID")
        return _saved(r, self.path)

    @guarded
    def names(self) -> list[str]:
        return [r[0] for r in self._conn.execute(
            "SELECT name FROM gate_baselines GROUP BY name ORDER BY MAX(id) DESC")]

    @guarded
    def latest(self) -> list[SavedBaseline]:
        """The latest version of every name, newest first."""
        rows = self._conn.execute(
            "SELECT id, name, saved_at, doc FROM gate_baselines WHERE id IN "
            "(SELECT MAX(id) FROM gate_baselines GROUP BY name) ORDER BY id DESC").fetchall()
        return [_saved(r, self.path) for r in rows]


def _saved(r: tuple[Any, ...], path: Path) -> SavedBaseline:
    return SavedBaseline(r[0], str(r[1]), row_time(r[2], path, "saved_at"),
                         load_json(r[3], path, "gate baseline"))


def open_baseline_store(path: Path | None) -> BaselineStore:
    from specdoctor.paths import default_db

    return BaselineStore(path or default_db())
