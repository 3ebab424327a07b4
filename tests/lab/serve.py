"""One lab server for a test module, started and stopped through the CLI as a user would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from specdoctor.lab import lab as labmod
from specdoctor.lab.launch import free_port
from tests.conftest import run_cli


@contextmanager
def lab_server(*up_args: str) -> Iterator[dict]:
    """``specdoctor lab up UP_ARGS --port P --json`` on a free port; yields its JSON, then
    ``lab down`` and checks the server is gone."""
    port = free_port()
    proc = run_cli("lab", "up", *up_args, "--port", str(port), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    try:
        yield json.loads(proc.stdout)
    finally:
        run_cli("lab", "down", "--port", str(port))
        assert not labmod.running(port)
