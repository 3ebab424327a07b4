"""Benchmark runs in the store: one ``bench_runs`` row per ``bench``/``sweep`` invocation (its
matrix and configurations, so ``--resume`` can rebuild the plan) and one ``bench_cells`` row per
finished or failed cell (configuration × prompt set × sampling × concurrency × repeat).

Each cell is written in its own transaction the moment it ends, so a crash, a dying server or
Ctrl-C loses at most the cell in flight; ``--resume`` reruns only cells not recorded as ok.
Same SQLite file as the other runs (``--db``), tables of its own.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.store.db import connect, guarded, load_json, row_key, row_limit, row_time

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_runs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    kind       TEXT NOT NULL,      -- bench | sweep
    status     TEXT NOT NULL,      -- running | ok | partial
    params     TEXT NOT NULL,      -- JSON: MatrixParams, repeat, options
    configs    TEXT NOT NULL       -- JSON: [{label, role, url | spec}]
);
CREATE TABLE IF NOT EXISTS bench_cells (
    run_id      INTEGER NOT NULL REFERENCES bench_runs(id),
    key         TEXT NOT NULL,     -- config|suite/sampling/cC|rR
    config      TEXT NOT NULL,
    suite       TEXT NOT NULL,
    sampling    TEXT NOT NULL,
    concurrency INTEGER NOT NULL,
    rep         INTEGER NOT NULL,
    status      TEXT NOT NULL,     -- ok | failed
    error       TEXT,
    finished_at REAL NOT NULL,
    result      TEXT NOT NULL,     -- JSON of the cell's figures and its requests
    PRIMARY KEY (run_id, key)
);
"""


@dataclass(frozen=True)
class BenchRun:
    id: int
    created_at: float
    kind: str
    status: str
    params: dict[str, Any]
    configs: list[dict[str, Any]]


@dataclass(frozen=True)
class CellRow:
    key: str
    config: str
    suite: str
    sampling: str
    concurrency: int
    rep: int
    status: str
    error: str | None
    result: dict[str, Any]


class BenchStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = connect(path, SCHEMA, check_same_thread=False)

    def close(self) -> None:
        self._conn.close()

    @guarded
    def new_run(self, kind: str, params: dict[str, Any], configs: list[dict[str, Any]]) -> int:
        with self._conn:
            cur = self._conn.execute(
                "INSERT INTO bench_runs (created_at, kind, status, params, configs) VALUES (?,?,?,?,?)",
                (time.time(), kind, "running", json.dumps(params), json.dumps(configs)))
        return int(cur.lastrowid or 0)

    @guarded
    def set_status(self, run_id: int, status: str) -> None:
        with self._conn:
            self._conn.execute("UPDATE bench_runs SET status = ? WHERE id = ?", (status, run_id))

    @guarded
    def run(self, run_id: int) -> BenchRun:
        r = self._conn.execute("SELECT id, created_at, kind, status, params, configs FROM bench_runs"
                               " WHERE id = ?", (row_key(run_id),)).fetchone()
        if r is None:
            raise InputError(f"no benchmark run {run_id} in {self.path}",
                             "list them with: specdoctor report --list")
        return _bench_run(r, self.path)

    @guarded
    def runs(self, limit: int = 50) -> list[BenchRun]:
        rows = self._conn.execute("SELECT id, created_at, kind, status, params, configs FROM bench_runs"
                                  " ORDER BY id DESC LIMIT ?", (row_limit(limit),)).fetchall()
        return [_bench_run(r, self.path) for r in rows]

    @guarded
    def put_cell(self, run_id: int, key: str, *, config: str, suite: str, sampling: str,
                 concurrency: int, rep: int, status: str, error: str | None,
                 result: dict[str, Any]) -> None:
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO bench_cells (run_id, key, config, suite, sampling, concurrency,"
                " rep, status, error, finished_at, result) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, key, config, suite, sampling, concurrency, rep, status, error, time.time(),
                 json.dumps(result)))

    @guarded
    def cells(self, run_id: int) -> list[CellRow]:
        return [CellRow(*r[:8], load_json(r[8], self.path, "cell result")) for r in self._conn.execute(
            "SELECT key, config, suite, sampling, concurrency, rep, status, error, result"
            " FROM bench_cells WHERE run_id = ? ORDER BY finished_at", (run_id,))]


def _bench_run(r: tuple[Any, ...], path: Path) -> BenchRun:
    return BenchRun(r[0], row_time(r[1], path), str(r[2]), str(r[3]),
                    load_json(r[4], path, "benchmark params"),
                    load_json(r[5], path, "benchmark configs", list))


def open_bench_store(path: Path | None) -> BenchStore:
    from specdoctor.paths import default_db

    return BenchStore(path or default_db())
