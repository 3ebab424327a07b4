"""Investigations and their hypothesis ledgers, in the same SQLite file as the runs.

An investigation is written when it starts (status ``running``) and rewritten after every
experiment, so a diagnosis that dies midway keeps its signature, its ledger and every
experiment that finished. Its own tables; ``store.db`` keeps the runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.store.db import (LIST_LIMIT, ensure_schema, guarded, load_json, row_key,
                                 row_limit, row_time)

SCHEMA = """
CREATE TABLE IF NOT EXISTS investigations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    target      TEXT NOT NULL,          -- what was diagnosed: a command, URL or log files
    status      TEXT NOT NULL,          -- running | done | failed
    signature   TEXT,                   -- JSON {"class", "evidence", ...}
    result      TEXT                    -- JSON printed by diagnose --json (when finished)
);
CREATE TABLE IF NOT EXISTS ledger_entries (
    investigation_id INTEGER NOT NULL REFERENCES investigations(id),
    position    INTEGER NOT NULL,       -- order in the ledger (verdict cost)
    hypothesis  TEXT NOT NULL,
    entry       TEXT NOT NULL,          -- JSON of ledger.Entry
    PRIMARY KEY (investigation_id, position)
);
CREATE TABLE IF NOT EXISTS experiment_results (
    investigation_id INTEGER NOT NULL REFERENCES investigations(id),
    idx         INTEGER NOT NULL,
    experiment  TEXT NOT NULL,
    result      TEXT NOT NULL,          -- JSON of ExperimentResult
    PRIMARY KEY (investigation_id, idx)
);
"""


@dataclass(frozen=True)
class Investigation:
    id: int
    created_at: float
    updated_at: float
    target: str
    status: str
    signature: dict[str, Any] | None
    result: dict[str, Any] | None
    ledger: list[dict[str, Any]]
    experiments: list[dict[str, Any]]


class LedgerStore:
    def __init__(self, path: Path) -> None:
        from specdoctor.store.db import Store

        # The runs' store opens the file (one place that does): the ledger adds its tables.
        self._runs = Store(path)
        self.path = path
        self._conn = self._runs._conn
        ensure_schema(self._conn, path, SCHEMA)

    def close(self) -> None:
        self._runs.close()

    @guarded
    def start(self, target: str) -> int:
        now = time.time()
        with self._conn:
            cur = self._conn.execute(
                "INSERT INTO investigations (created_at, updated_at, target, status)"
                " VALUES (?,?,?,?)", (now, now, target, "running"))
        return int(cur.lastrowid or 0)

    @guarded
    def save(self, inv_id: int, *, signature: dict[str, Any] | None,
             ledger: list[dict[str, Any]], experiments: list[dict[str, Any]],
             status: str = "running", result: dict[str, Any] | None = None) -> None:
        """Replace the investigation's state in one transaction."""
        with self._conn:
            self._conn.execute(
                "UPDATE investigations SET updated_at=?, status=?, signature=?, result=?"
                " WHERE id=?", (time.time(), status, _dump(signature), _dump(result), inv_id))
            self._conn.execute("DELETE FROM ledger_entries WHERE investigation_id=?", (inv_id,))
            self._conn.executemany(
                "INSERT INTO ledger_entries VALUES (?,?,?,?)",
                [(inv_id, i, e["id"], json.dumps(e)) for i, e in enumerate(ledger)])
            self._conn.execute("DELETE FROM experiment_results WHERE investigation_id=?",
                               (inv_id,))
            self._conn.executemany(
                "INSERT INTO experiment_results VALUES (?,?,?,?)",
                [(inv_id, i, r["experiment"], json.dumps(r)) for i, r in enumerate(experiments)])

    @guarded
    def get(self, inv_id: int) -> Investigation:
        r = self._conn.execute(
            "SELECT id, created_at, updated_at, target, status, signature, result"
            " FROM investigations WHERE id=?", (row_key(inv_id),)).fetchone()
        if r is None:
            raise InputError(f"no investigation {inv_id} in {self.path}",
                             "list them with: specdoctor ledger list")
        ledger = [load_json(x[0], self.path, "ledger entry") for x in self._conn.execute(
            "SELECT entry FROM ledger_entries WHERE investigation_id=? ORDER BY position",
            (inv_id,))]
        exps = [load_json(x[0], self.path, "experiment result") for x in self._conn.execute(
            "SELECT result FROM experiment_results WHERE investigation_id=? ORDER BY idx",
            (inv_id,))]
        return Investigation(r[0], row_time(r[1], self.path), row_time(r[2], self.path, "updated_at"),
                             str(r[3]), str(r[4]),
                             load_json(r[5], self.path, "signature", optional=True),
                             load_json(r[6], self.path, "investigation result", optional=True),
                             ledger, exps)

    @guarded
    def list(self, limit: int = LIST_LIMIT) -> list[Investigation]:
        ids = [r[0] for r in self._conn.execute(
            "SELECT id FROM investigations ORDER BY id DESC LIMIT ?", (row_limit(limit),))]
        return [self.get(i) for i in ids]


def _dump(x: Any) -> str | None:
    return None if x is None else json.dumps(x)


def open_ledger_store(path: Path | None) -> LedgerStore:
    from specdoctor.paths import default_db

    return LedgerStore(path or default_db())
