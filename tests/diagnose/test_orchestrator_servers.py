"""No server outlives a diagnosis, and a diagnosis that breaks keeps what it found.

A real process stands in for the engine (``fake_server.py``: ready on /v1/models, one worker in
its group), started and stopped through the diagnosis' own launcher (``launch.Servers``). A report that cannot be written
is a note; a break anywhere else saves the partial investigation and raises a clear error; a
``diagnose`` command ended by SIGTERM stops its server and the server's worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdoctor.diagnose import orchestrator
from specdoctor.launch import LaunchSpec, Servers
from specdoctor.launch.servers import _pid_alive
from specdoctor.store.ledger import open_ledger_store

FAKE = Path(__file__).with_name("fake_server.py")


def _options(tmp_path: Path) -> orchestrator.Options:
    return orchestrator.Options(sampled=None, suites=("code",), prompts_per_suite=2,
                                max_tokens=4, workdir=tmp_path / "out")


def _server_pids(log: Path) -> tuple[int, int]:
    """(the server's pid, its worker's pid) from the baseline log and the process table."""
    text = log.read_text()
    worker = int(text.split("worker ", 1)[1].split()[0])
    leader = int(Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[2]) \
        if _pid_alive(worker) else -1
    return leader, worker


class Watching(Servers):
    """The diagnosis' own launcher, noting the pids of what it started (to check they are gone)."""

    def __init__(self) -> None:
        super().__init__(timeout_s=60)
        self.pids: list[tuple[int, int]] = []

    def start(self, launch, log_path):
        server = super().start(launch, log_path)
        for _ in range(50):
            if "worker " in log_path.read_text():
                break
            time.sleep(0.1)
        self.pids.append(_server_pids(log_path))
        return server


def _gone(pids: list[tuple[int, int]]) -> bool:
    return all(not _pid_alive(p) for pair in pids for p in pair if p > 0)


def _raises(exc: Exception):
    def broken(*_a, **_k):
        raise exc
    return broken


FAKE_TARGET = orchestrator.Target(launch=LaunchSpec(argv=(sys.executable, str(FAKE))))


def test_a_report_that_breaks_is_a_note_and_the_verdicts_are_kept(tmp_path, monkeypatch,
                                                                  isolated_store):
    from specdoctor.diagnose import report

    monkeypatch.setattr(report, "write_report", _raises(RuntimeError("disk full")))
    store, launcher = open_ledger_store(isolated_store), Watching()
    d = orchestrator.diagnose(FAKE_TARGET, _options(tmp_path), launcher, store)
    assert launcher.pids and _gone(launcher.pids)
    assert d.report is None
    assert any("report could not be written: RuntimeError: disk full" in n for n in d.notes)
    assert "disk full" in (tmp_path / "out" / "crash-report.txt").read_text()
    saved = store.get(d.investigation)
    assert saved.status == "done" and saved.result["signature"]["class"] == d.signature.cls
    store.close()


def test_a_break_elsewhere_saves_the_partial_investigation_and_names_it(tmp_path, monkeypatch,
                                                                       isolated_store):
    monkeypatch.setattr(orchestrator, "classify", _raises(ZeroDivisionError("a bug")))
    store, launcher = open_ledger_store(isolated_store), Watching()
    with pytest.raises(orchestrator.DiagnosisFailed) as exc:
        orchestrator.diagnose(FAKE_TARGET, _options(tmp_path), launcher, store)
    assert "while classifying the symptom: ZeroDivisionError: a bug" in exc.value.problem
    assert "specdoctor ledger show" in exc.value.fix and "crash-diagnose.txt" in exc.value.fix
    assert launcher.pids and _gone(launcher.pids)
    inv = store.list()[0]
    assert inv.status == "failed" and "a bug" in inv.result["error"]
    # what was found before the break is in it: the measurement's failure on this server
    assert any(n.startswith("greedy:") for n in inv.result["notes"]), inv.result["notes"]
    store.close()


def test_a_diagnose_command_ended_by_sigterm_stops_its_server_and_its_workers(tmp_path):
    out = tmp_path / "out"
    cmd = f"{sys.executable} {FAKE} --hang"   # measuring never ends: diagnose stays busy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(orchestrator.__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdoctor", "diagnose", "--launch", cmd, "--sampling", "greedy",
         "--suite", "code", "--num-prompts", "2", "--max-tokens", "4", "--no-store", "--json",
         "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = out / "server-baseline.log"
    pids = None
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and pids is None:
            if log.is_file() and "worker " in log.read_text():
                pids = _server_pids(log)
            time.sleep(0.2)
        assert pids is not None, proc.stdout.read().decode() if proc.poll() is not None else ""
        time.sleep(2.0)                       # in the measurement, waiting on the server
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _gone([pids]):
            time.sleep(0.2)
        assert _gone([pids]), f"left running: {pids}"
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids or ():
            if p > 0 and _pid_alive(p):
                os.kill(p, signal.SIGKILL)


def test_diagnose_ready_timeout_bounds_each_server_it_starts(tmp_path):
    # a real process that never serves: `diagnose --ready-timeout 2` gives up on it after 2 s
    # (the default is 900 s), stops it, and says so; the rest of the diagnosis goes on
    out = tmp_path / "out"
    cmd = "sh -c 'echo pid $$; exec sleep 300'"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(orchestrator.__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "specdoctor", "diagnose", "--launch", cmd, "--sampling", "greedy",
         "--suite", "code", "--num-prompts", "2", "--max-tokens", "4", "--no-store", "--json",
         "--ready-timeout", "2", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - t0
    log = (out / "server-baseline.log").read_text()
    pid = int(log.split("pid ", 1)[1].split()[0])
    assert not _pid_alive(pid), f"left running: {pid}"
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = " ".join(json.loads(proc.stdout)["notes"])
    assert "the server was not ready after 2 s" in notes, notes
    assert "--ready-timeout" in notes   # the fix names the option that raises the limit
    assert took < 200
