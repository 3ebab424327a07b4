"""Stopping leaves nothing running, on real processes standing in for a server: a worker that
outlives the process that was started is stopped with it, a server started with
``die_with_parent`` dies when the command that started it is killed outright, and
``stop_started`` stops whatever this process started and did not stop."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from specdoctor.launch import LaunchSpec, free_port, start, started, stop, stop_started
from specdoctor.launch.servers import _pid_alive

# A "server" whose leader spawns a worker in its own group, prints the worker's pid and exits,
# as an engine's API process can die and leave its engine process behind.
LEADER_LEAVES_WORKER = textwrap.dedent("""
    import subprocess, sys
    w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print("worker", w.pid, flush=True)
""")


def _spec(code: str) -> LaunchSpec:
    return LaunchSpec(argv=(sys.executable, "-c", code), port=free_port(), label="t")


def _wait_for(pred, timeout_s: float = 20.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _pid_in_log(log: Path, word: str) -> int:
    assert _wait_for(lambda: word in log.read_text()), log.read_text()
    return int(log.read_text().split(word, 1)[1].split()[0])


def test_a_worker_outliving_its_leader_is_stopped(tmp_path: Path):
    log = tmp_path / "s.log"
    h = start(_spec(LEADER_LEAVES_WORKER), log)
    worker = _pid_in_log(log, "worker")
    assert _wait_for(lambda: not h.alive())          # the leader exited on its own
    assert _pid_alive(worker)
    try:
        stop(h, grace_s=5)
        assert _wait_for(lambda: not _pid_alive(worker), 10), "the worker was left running"
    finally:
        if _pid_alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_stop_started_stops_what_this_process_did_not(tmp_path: Path):
    h = start(_spec("import time; time.sleep(300)"), tmp_path / "s.log")
    assert h in started()
    stopped = stop_started(grace_s=5)
    assert h in stopped and not h.alive() and h not in started()


COMMANDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from specdoctor.launch import LaunchSpec, free_port, start
    spec = LaunchSpec(argv=(sys.executable, "-c", "import time; time.sleep(300)"),
                      port=free_port(), label="t")
    h = start(spec, Path(sys.argv[1]), die_with_parent={die})
    print("server", h.pid, flush=True)
    time.sleep(300)
""")


def _killed_commander_leaves(tmp_path: Path, die: bool) -> bool:
    """Start a server from a child command, SIGKILL the command; is the server still alive?"""
    out = tmp_path / f"commander-{die}.out"
    with open(out, "w") as fh:
        cmd = subprocess.Popen([sys.executable, "-c", COMMANDER.format(die=die),
                                str(tmp_path / "server.log")], stdout=fh,
                               stderr=subprocess.STDOUT, env=os.environ.copy())
    server = _pid_in_log(out, "server")
    cmd.kill()
    cmd.wait()
    try:
        return not _wait_for(lambda: not _pid_alive(server), 10)
    finally:
        if _pid_alive(server):
            os.killpg(server, signal.SIGKILL)


def test_a_server_dies_with_the_command_that_started_it(tmp_path: Path):
    assert not _killed_commander_leaves(tmp_path, die=True)


def test_without_die_with_parent_a_server_outlives_its_command(tmp_path: Path):
    # the control: what `lab up` relies on, and what the test above would see without it
    assert _killed_commander_leaves(tmp_path, die=False)
