"""One lab server for a test module, started and stopped through the CLI as a user would.

The server lives in a ``$SPECDOCTOR_HOME`` of its own (its state file and log), made for it:
each test has its own home, and the module's tests share the server, so a test that needs the
server's lab state (``lab status``, ``lab down``, bare ``specdoctor``) passes ``info["env"]``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from specdoctor.launch import free_port
from tests.conftest import run_cli


@contextmanager
def lab_server(*up_args: str, env: dict[str, str | None] | None = None,
               port: int | None = None) -> Iterator[dict]:
    """``specdoctor lab up UP_ARGS --port P --json`` on ``port`` (default: a free one); yields
    its JSON plus ``env`` (the server's home), then ``lab down`` and checks the server is gone.
    ``env``: more for the server's environment (``None`` unsets a variable: ``run_cli``)."""
    port = free_port() if port is None else port
    home = {"SPECDOCTOR_HOME": tempfile.mkdtemp(prefix="specdoctor-lab-home-")}
    proc = run_cli("lab", "up", *up_args, "--port", str(port), "--json",
                   env={**(env or {}), **home})
    assert proc.returncode == 0, proc.stderr[-3000:]
    try:
        yield {**json.loads(proc.stdout), "env": home}
    finally:
        run_cli("lab", "down", "--port", str(port), env=home)
        status = json.loads(run_cli("lab", "status", "--json", env=home).stdout)
        assert not [x for x in status["servers"] if x["url"].endswith(f":{port}")], status
