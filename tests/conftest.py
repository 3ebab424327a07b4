"""Shared test set-up: every test gets its own store and specdoctor home, except the lab's
model cache, which is shared (building the tiny model is deterministic and takes ~15 s)."""

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "store.db"
    monkeypatch.setenv("SPECDOCTOR_DB", str(db))
    return db


def run_cli(*args: str, env: dict | None = None, timeout: float = 900, stdin: str | None = None):
    """Run `python -m specdoctor ARGS` as a user would; returns the CompletedProcess."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=timeout, input=stdin,
                          env={**os.environ, **(env or {})})
