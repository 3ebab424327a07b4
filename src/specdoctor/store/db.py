"""The SQLite store: every run with its target, launch spec, raw scrapes and profile.

Default file: ``$SPECDOCTOR_DB``, else ``$SPECDOCTOR_HOME/specdoctor.db`` (``~/.cache/specdoctor``);
every command that records takes ``--db PATH``. A run is written in one transaction, so a
failure never leaves half a run behind; a run that failed midway is still written whole, with
``status='failed'`` and its error, so what was measured is kept.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from specdoctor.errors import InputError

SQLITE_INT_MAX = 2 ** 63 - 1  # SQLite integers are 64-bit; Python's are not
LIST_LIMIT = 20  # rows a listing shows unless told otherwise (`runs`, `ledger list`)
STORE_FIX = "pass --db PATH to a writable specdoctor store (a new file is created), or --no-store"
# A row's time: from 1970 to the year 9999 (what time.localtime and datetime can show).
TIME_RANGE = (0.0, 253402300799.0)

M = TypeVar("M", bound=Callable[..., Any])


def connect(path: Path, schema: str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """The one way a store file is opened (runs, ledgers, baselines and benchmarks alike): its
    folder made, its tables created when absent, and tables already there checked to hold the
    columns ``schema`` names. A file that is no SQLite database, is read-only where a table must
    be made, or holds a table of another schema is bad input (InputError), never a crash."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30, check_same_thread=check_same_thread)
    except (OSError, sqlite3.Error) as exc:
        raise InputError(f"cannot open the store {path}: {exc}", STORE_FIX) from exc
    try:
        ensure_schema(conn, path, schema)
    except InputError:
        conn.close()
        raise
    return conn


def ensure_schema(conn: sqlite3.Connection, path: Path, schema: str) -> None:
    """``schema``'s tables made where absent, and checked to hold its columns where present."""
    try:
        for table, columns in schema_columns(schema).items():  # before its indexes are made
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in columns if c not in have]
            if have and missing:
                raise InputError(
                    f"the store {path} is of another schema: its table {table} has no column "
                    f"{', '.join(missing)}", STORE_FIX)
        conn.executescript(schema)
    except sqlite3.Error as exc:
        raise InputError(f"cannot use the store {path}: {exc}", STORE_FIX) from exc


def schema_columns(schema: str) -> dict[str, list[str]]:
    """Each table a schema creates, with its column names in order."""
    out: dict[str, list[str]] = {}
    for table, body in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\);", schema, re.S):
        out[table] = [m.group(1) for line in body.splitlines()
                      if (m := re.match(r"\s*(\w+)\s+[A-Z]", line)) and m.group(1) != "PRIMARY"]
    return out


def guarded(method: M) -> M:
    """A store method whose SQLite failures (a read-only file, a locked or damaged database)
    end as bad input naming the store, not as a crash."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise InputError(f"cannot use the store {self.path}: {exc}", STORE_FIX) from exc
    return wrapper  # type: ignore[return-value]


def load_json(text: Any, path: Path, what: str, kind: type | tuple[type, ...] = dict,
              optional: bool = False) -> Any:
    """A JSON column of a stored row; a row whose column does not parse, or is not ``kind``,
    is a damaged row: bad input naming the store and the column."""
    if text is None and optional:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(f"the store {path} holds a damaged row: its {what} is not JSON "
                         f"({type(exc).__name__})", STORE_FIX) from None
    if not isinstance(value, kind) and not (value is None and optional):
        raise InputError(f"the store {path} holds a damaged row: its {what} is a "
                         f"{type(value).__name__}", STORE_FIX)
    return value


def row_time(value: Any, path: Path, what: str = "created_at") -> float:
    """A stored time in seconds since the epoch, checked: a damaged row (text, NaN, a time
    past the year 9999) is bad input, not an overflow where it is printed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not TIME_RANGE[0] <= value <= TIME_RANGE[1]:
        raise InputError(f"the store {path} holds a damaged row: its {what} is {value!r:.40}, "
                         "not a time from 1970 to 9999", STORE_FIX)
    return float(value)


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
        self._conn = connect(path, SCHEMA)

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
            if self._conn.in_transaction:  # a BEGIN refused (read-only) opened none
                cur.execute("ROLLBACK")
            raise

    @guarded
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

    @guarded
    def runs(self, limit: int = LIST_LIMIT) -> list[RunRow]:
        rows = self._conn.execute(
            "SELECT id, created_at, kind, engine, target, status, error, result, launch_spec"
            " FROM runs ORDER BY id DESC LIMIT ?", (row_limit(limit),)).fetchall()
        return [_row(r, self.path) for r in rows]

    @guarded
    def run(self, run_id: int) -> RunRow:
        r = self._conn.execute(
            "SELECT id, created_at, kind, engine, target, status, error, result, launch_spec"
            " FROM runs WHERE id = ?", (row_key(run_id),)).fetchone()
        if r is None:
            raise InputError(f"no run {run_id} in {self.path}", "list runs with: specdoctor runs")
        return _row(r, self.path)

    @guarded
    def requests(self, run_id: int) -> list[RequestRow]:
        """The run's per-request records in request order (the units of its bootstrap)."""
        return [RequestRow(r[0], r[1], r[2], r[3],
                           load_json(r[4] or None, self.path, "request profile", optional=True),
                           load_json(r[5] or None, self.path, "request per_step", list,
                                     optional=True))
                for r in self._conn.execute(
                    "SELECT idx, prompt, completion_tokens, latency_s, profile, per_step"
                    " FROM requests WHERE run_id = ? ORDER BY idx", (run_id,))]

    @guarded
    def scrapes(self, run_id: int) -> list[tuple[str, float, str]]:
        return [tuple(r) for r in self._conn.execute(  # type: ignore[misc]
            "SELECT phase, taken_at, body FROM scrapes WHERE run_id = ? ORDER BY id", (run_id,))]


def _dump(x: Any) -> str | None:
    return None if x is None else json.dumps(x)


def _row(r: tuple[Any, ...], path: Path) -> RunRow:
    return RunRow(r[0], row_time(r[1], path), str(r[2]), str(r[3]), str(r[4]), str(r[5]),
                  None if r[6] is None else str(r[6]), load_json(r[7], path, "run result"),
                  load_json(r[8] or None, path, "run launch_spec", optional=True))


def open_store(path: Path | None) -> Store:
    from specdoctor.paths import default_db

    return Store(path or default_db())
