"""The SQLite store: every run with its target, launch spec, raw scrapes and profile.

Default file: ``$SPECDOCTOR_DB``, else ``$SPECDOCTOR_HOME/specdoctor.db`` (``~/.cache/specdoctor``);
every command that records takes ``--db PATH``. A run is written in one transaction, so a
failure never leaves half a run behind; a run that failed midway is still written whole, with
``status='failed'`` and its error, so what was measured is kept.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError

SQLITE_INT_MAX = 2 ** 63 - 1
LIST_LIMIT = 20  # rows a listing shows unless told otherwise (`runs`, `ledger list`)  # SQLite integers are 64-bit; Python's are not


def row_key(n: int) -> int:
    """N as a row id to look up: an id past SQLite's 64-bit range matches no row, as an unknown
    id does (so the caller says "no run N", never overflows)."""
    return n if -SQLITE_INT_MAX - 1 <= n <= SQLITE_INT_MAX else -1


def row_limit(n: int) -> int:
    """N as a LIMIT: at most SQLite's largest integer, never negative (SQLite reads -1 as none)."""
    return max(0, min(n, SQLITE_INT_MAX))


SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  REAL NOT NULL,
    kind        TEXT NOT NULL,          -- measure | logs | metrics | oracle
    engine      TEXT NOT NULL,
    target      TEXT NOT NULL,          -- URL or file paths
    status      TEXT NOT NULL,          -- ok | failed
    error       TEXT,
    launch_spec TEXT,                   -- JSON of the LaunchSpec when specdoctor started it
    params      TEXT NOT NULL,          -- JSON
    profile     TEXT,                   -- JSON of the total AcceptanceProfile
    result      TEXT NOT NULL           -- JSON printed by --json
);
CREATE TABLE IF NOT EXISTS scrapes (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id   INTEGER NOT NULL REFERENCES runs(id),
    phase    TEXT NOT NULL,
    taken_at REAL NOT NULL,
    body     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    run_id   INTEGER NOT NULL REFERENCES runs(id),
    idx      INTEGER NOT NULL,
    prompt   TEXT NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    profile  TEXT,
    per_step TEXT,
    PRIMARY KEY (run_id, idx)
);
"""


@dataclass(frozen=True)
class RunRow:
    id: int
    created_at: float
    kind: str
    engine: str
    target: str
    status: str
    error: str | None
    result: dict[str, Any]
    launch_spec: dict[str, Any] | None


@dataclass(frozen=True)
class RequestRow:
    index: int
    prompt: str
    completion_tokens: int | None
    latency_s: float | None
    profile: dict[str, Any] | None  # AcceptanceProfile.to_json() of this request
    per_step: list[Any] | None


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(path))
            self._conn.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot open the store {path}: {exc}",
                             "pass --db PATH to a writable file, or set SPECDOCTOR_DB") from exc

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        cur = self._conn.cursor()
        try:
            cur.execute("BEGIN")
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def add_run(
        self,
        *,
        kind: str,
        engine: str,
        target: str,
        params: dict[str, Any],
        result: dict[str, Any],
        profile: dict[str, Any] | None,
        status: str = "ok",
        error: str | None = None,
        launch_spec: dict[str, Any] | None = None,
        scrapes: list[tuple[str, float, str]] = (),  # type: ignore[assignment]
        requests: list[dict[str, Any]] = (),  # type: ignore[assignment]
    ) -> int:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO runs (created_at, kind, engine, target, status, error, launch_spec,"
                " params, profile, result) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (time.time(), kind, engine, target, status, error,
                 _dump(launch_spec), json.dumps(params), _dump(profile), json.dumps(result)),
            )
            run_id = int(cur.lastrowid or 0)
            cur.executemany(
                "INSERT INTO scrapes (run_id, phase, taken_at, body) VALUES (?,?,?,?)",
                [(run_id, ph, t, body) for ph, t, body in scrapes],
            )
            cur.executemany(
                "INSERT INTO requests (run_id, idx, prompt, completion_tokens, latency_s, profile,"
                " per_step) VALUES (?,?,?,?,?,?,?)",
                [(run_id, r["index"], r["prompt"], r["completion_tokens"], r["latency_s"],
                  _dump(r.get("profile")), _dump(r.get("per_step"))) for r in requests],
            )
        return run_id

    def runs(self, limit: int = LIST_LIMIT) -> list[RunRow]:
        rows = self._conn.execute(
            "SELECT id, created_at, kind, engine, target, status, error, result, launch_spec"
            " FROM runs ORDER BY id DESC LIMIT ?", (row_limit(limit),)).fetchall()
        return [_row(r) for r in rows]

    def run(self, run_id: int) -> RunRow:
        r = self._conn.execute(
            "SELECT id, created_at, kind, engine, target, status, error, result, launch_spec"
            " FROM runs WHERE id = ?", (row_key(run_id),)).fetchone()
        if r is None:
            raise InputError(f"no run {run_id} in {self.path}", "list runs with: specdoctor runs")
        return _row(r)

    def requests(self, run_id: int) -> list[RequestRow]:
        """The run's per-request records in request order (the units of its bootstrap)."""
        return [RequestRow(r[0], r[1], r[2], r[3], json.loads(r[4]) if r[4] else None,
                           json.loads(r[5]) if r[5] else None)
                for r in self._conn.execute(
                    "SELECT idx, prompt, completion_tokens, latency_s, profile, per_step"
                    " FROM requests WHERE run_id = ? ORDER BY idx", (run_id,))]

    def scrapes(self, run_id: int) -> list[tuple[str, float, str]]:
        return [tuple(r) for r in self._conn.execute(  # type: ignore[misc]
            "SELECT phase, taken_at, body FROM scrapes WHERE run_id = ? ORDER BY id", (run_id,))]


def _dump(x: Any) -> str | None:
    return None if x is None else json.dumps(x)


def _row(r: tuple[Any, ...]) -> RunRow:
    return RunRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                  json.loads(r[8]) if r[8] else None)


def open_store(path: Path | None) -> Store:
    from specdoctor.paths import default_db

    return Store(path or default_db())
