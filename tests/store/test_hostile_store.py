"""A store file that cannot be used as one is bad input (2), named, never a crash (70): a file
that is no database, a table of another schema, a read-only database, damaged rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.store.baselines import BaselineStore
from specdoctor.store.bench import BenchStore
from specdoctor.store.db import Store, schema_columns, SCHEMA
from specdoctor.store.ledger import LedgerStore
from tests.conftest import run_cli

STORES = (Store, LedgerStore, BaselineStore, BenchStore)


def _run(store: Store) -> int:
    return store.add_run(kind="logs", engine="vllm", target="x.log", params={}, result={"a": 1},
                         profile=None)


def test_the_schema_is_read_whole():
    assert schema_columns(SCHEMA)["runs"][:3] == ["id", "created_at", "kind"]
    assert schema_columns(SCHEMA)["requests"][-1] == "per_step"


@pytest.mark.parametrize("cls", STORES)
def test_a_file_that_is_no_database(cls, tmp_path):
    path = tmp_path / "x.db"
    path.write_text("not a database at all\n" * 100)
    with pytest.raises(InputError, match="file is not a database"):
        cls(path)


@pytest.mark.parametrize("cls", STORES)
def test_a_table_of_another_schema(cls, tmp_path):
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    for table in ("runs", "investigations", "gate_baselines", "bench_runs"):
        conn.execute(f"CREATE TABLE {table} (x)")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="is of another schema: its table .* has no column"):
        cls(path)


def test_a_read_only_database_refuses_a_write_as_bad_input(tmp_path):
    store = Store(tmp_path / "x.db")
    store._conn.execute("PRAGMA query_only = 1")  # what a read-only file answers to a write
    with pytest.raises(InputError, match="cannot use the store .*readonly"):
        _run(store)


@pytest.mark.parametrize("column, value, needle", [
    ("result", "{bad", "its run result is not JSON"),
    ("result", "[1, 2]", "its run result is a list"),
    ("created_at", 1e300, "its created_at is 1e\\+300, not a time"),
    ("created_at", "yesterday", "its created_at is 'yesterday'"),
    ("launch_spec", "[" * 100_000, "its run launch_spec is not JSON"),
])
def test_a_damaged_row(tmp_path, column, value, needle):
    store = Store(tmp_path / "x.db")
    run_id = _run(store)
    store._conn.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, run_id))
    store._conn.commit()
    with pytest.raises(InputError, match=needle):
        store.run(run_id)
    with pytest.raises(InputError, match=needle):
        store.runs()


def test_the_cli_says_which_store_and_exits_2(tmp_path):
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE runs (x)")
    conn.commit()
    conn.close()
    proc = run_cli("runs", "--db", str(path), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"the store {path} is of another schema" in proc.stderr
    store = Store(tmp_path / "y.db")
    run_id = _run(store)
    store._conn.execute("UPDATE runs SET created_at = 1e300")
    store._conn.commit()
    proc = run_cli("runs", str(run_id), "--db", str(tmp_path / "y.db"), timeout=60)
    assert proc.returncode == 2 and "damaged row" in proc.stderr, proc.stderr
