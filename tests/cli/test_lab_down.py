"""`lab down` stops only the server it names; bare `specdoctor` starts nothing and names the
servers that are up.

No vLLM boots here: the "servers" are sleeping processes in their own session, registered in a
private $SPECDOCTOR_HOME exactly as `lab up` registers a server (its state file per port).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from specdoctor.launch import LaunchSpec, ServerHandle, save_handle
from tests.conftest import run_cli


def _fake_server(home: Path, port: int) -> int:
    # The sleep outlives its shell, so it is not this test's child: `lab down` must stop it
    # exactly as it stops a server started by an earlier command.
    out = subprocess.run(["setsid", "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, check=True).stdout
    pid = int(out.strip())
    spec = LaunchSpec(argv=("sleep", "300"), port=port, label=f"fake on {port}")
    save_handle(ServerHandle(spec, pid, home / f"{port}.log", time.time()),
                home / "lab" / "servers" / f"{port}.json")
    return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def home(tmp_path: Path):
    pids: list[int] = []
    yield tmp_path, pids
    for pid in pids:  # whatever a failed test left behind
        if _alive(pid):
            os.kill(pid, 9)


def test_down_without_port_stops_only_the_default_server(home):
    h, pids = home
    env = {"SPECDOCTOR_HOME": str(h)}
    pids += [_fake_server(h, 8765), _fake_server(h, 45678)]
    r = run_cli("lab", "down", env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "stopped fake on 8765" in r.stdout and "45678" not in r.stdout
    assert "still running: fake on 45678" in r.stderr
    assert "specdoctor lab down --port 45678" in r.stderr
    assert not _alive(pids[0]) and _alive(pids[1])
    r = run_cli("lab", "down", env=env, timeout=60)
    assert r.stdout == "" and "no lab server running on port 8765" in r.stderr
    r = run_cli("lab", "down", "--port", "45678", "--json", env=env, timeout=60)
    out = json.loads(r.stdout)
    assert [s["port"] for s in out["stopped"]] == [45678] and out["still_running"] == []
    assert not _alive(pids[1])


def test_down_all_stops_every_server(home):
    h, pids = home
    pids += [_fake_server(h, 8765), _fake_server(h, 45679)]
    r = run_cli("lab", "down", "--all", env={"SPECDOCTOR_HOME": str(h)}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("stopped ") == 2 and not any(_alive(p) for p in pids)


def test_bare_specdoctor_starts_nothing_and_names_what_to_run(home):
    # a lab server is registered: bare specdoctor names it, starts no other, measures nothing
    h, pids = home
    pids.append(_fake_server(h, 45991))
    r = run_cli(env={"SPECDOCTOR_HOME": str(h)}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "specdoctor diagnose --url" in r.stdout and "specdoctor lab up" in r.stdout
    assert "lab server running: http://127.0.0.1:45991" in r.stderr
    assert "stop it: specdoctor lab down --port 45991" in r.stderr
    assert len(list((h / "lab" / "servers").glob("*.json"))) == 1  # no second server registered
