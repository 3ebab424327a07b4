"""The one place that owns a server's life: start it from a ``LaunchSpec``, wait until it is
ready, stop it. Engine-agnostic.

The server runs detached in its own session (a process group of its own) with its output in a
log file, so a later command can find, watch and stop it; readiness is ``GET /v1/models``
answering 200.

Stopping signals the server's whole process group, also when the process that was started has
already exited: an engine's workers can outlive it. A command that must leave nothing behind
(``diagnose``) starts its servers with ``die_with_parent`` (Linux: the kernel sends them SIGTERM
if the command itself is killed) and runs inside ``stopping_started_on_exit``.

Three ways in, one life:

- ``launch(spec, log)``: start and wait; a server that does not come up is stopped and the
  error shows its log tail (``lab up``, ``bench``, ``sweep``);
- ``running(spec, log)``: start, wait, yield, stop, whatever happens in the block — "start,
  measure, stop" (the compile-cache A/B);
- ``Servers``: keeps every server started through it until it is stopped, ``stop_all`` on the
  way out (``diagnose`` and its relaunch experiments, which receive it as their launcher).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import LabError
from specdoctor.launch.spec import LaunchSpec

READY_PATH = "/v1/models"
log = logging.getLogger(__name__)


@dataclass
class ServerHandle:
    """A running (or once-running) server: enough to find, watch and stop it later."""

    spec: LaunchSpec
    pid: int
    log_path: Path
    started_at: float

    @property
    def url(self) -> str:
        return self.spec.url

    def alive(self) -> bool:
        return _pid_alive(self.pid)

    def to_json(self) -> dict[str, object]:
        return {
            "spec": self.spec.to_json(),
            "pid": self.pid,
            "log_path": str(self.log_path),
            "started_at": self.started_at,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> ServerHandle:
        spec_d = dict(d["spec"])  # type: ignore[arg-type]
        spec_d["argv"] = tuple(spec_d["argv"])  # type: ignore[arg-type]
        return cls(LaunchSpec.from_json(spec_d), int(d["pid"]), Path(str(d["log_path"])), float(d["started_at"]))  # type: ignore[arg-type]


# Servers this process started and has not stopped, by pid (``stop_started``).
_STARTED: dict[int, ServerHandle] = {}
PR_SET_PDEATHSIG = 1


def start(spec: LaunchSpec, log_path: Path, die_with_parent: bool = False) -> ServerHandle:
    """Start the server detached (its own session), stdout and stderr into ``log_path``.

    ``die_with_parent``: the server gets SIGTERM when this process dies, however it dies (even
    SIGKILL, which runs no clean-up); Linux only, elsewhere ignored. Leave it off for servers
    meant to outlive the command (``lab up``)."""
    if port_in_use(spec.host, spec.port):
        raise LabError(
            f"port {spec.port} is already in use on {spec.host}",
            f"stop what runs there (specdoctor lab down --port {spec.port}, if it is a lab server) "
            "or pick another with --port",
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **spec.env}
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                list(spec.argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True,
                preexec_fn=_die_with(os.getpid()) if die_with_parent else None,  # noqa: PLW1509 - a C call only
            )
        except OSError as exc:
            raise LabError(f"cannot start {spec.argv[0]}: {exc}", "check the launch command") from exc
    handle = ServerHandle(spec, proc.pid, log_path, time.time())
    _STARTED[handle.pid] = handle
    return handle


def _die_with(parent: int) -> Callable[[], None] | None:
    """The child's pre-exec step asking the kernel for SIGTERM when ``parent`` dies; None where
    there is no prctl (not Linux). Everything is looked up here, so the child only makes the C
    call (no import, no lock between fork and exec)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    getppid, kill, me = os.getppid, os.kill, os.getpid

    def pre_exec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if getppid() != parent:   # the parent died before the request was in place
            kill(me(), signal.SIGTERM)
    return pre_exec


def started() -> list[ServerHandle]:
    """Servers this process started and has not stopped yet."""
    return list(_STARTED.values())


def stop_started(grace_s: float = 20.0) -> list[ServerHandle]:
    """Stop every server this process started and has not stopped; returns them."""
    left = started()
    for h in left:
        stop(h, grace_s)
    return left


@contextmanager
def stopping_started_on_exit(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)
                             ) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP end the command the way Ctrl-C does (an exception,
    so every ``finally`` on the way runs and stops its server); on the way out, whatever ended
    the block, every server this process started and did not stop is stopped."""
    installed: dict[int, Any] = {}

    def leave(signum: int, _frame: Any) -> None:
        for sig in installed:
            signal.signal(sig, signal.SIG_IGN)   # a second signal must not cut the clean-up
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        for sig in signals:
            installed[sig] = signal.signal(sig, leave)
    try:
        yield
    finally:
        try:
            stop_started()
        finally:
            for sig, previous in installed.items():
                signal.signal(sig, previous)


def wait_ready(
    handle: ServerHandle,
    timeout_s: float = 600.0,
    on_tick: Callable[[float, str], None] | None = None,
    poll_s: float = 1.0,
) -> None:
    """Block until the server answers ``GET /v1/models`` with 200; fail fast if it died."""
    t0 = time.monotonic()
    while True:
        elapsed = time.monotonic() - t0
        if on_tick:
            on_tick(elapsed, last_log_line(handle.log_path))
        if not handle.alive():
            stop(handle)  # what it spawned may still run
            raise LabError(
                f"the server exited during start-up; last log lines:\n{tail(handle.log_path, 15)}",
                f"read the whole log: {handle.log_path}",
            )
        if http_ok(handle.spec.url + READY_PATH):
            return
        if elapsed > timeout_s:
            stop(handle)
            raise LabError(
                f"the server was not ready after {timeout_s:.0f} s; last log lines:\n{tail(handle.log_path, 15)}",
                f"read the whole log: {handle.log_path}, or raise --ready-timeout",
            )
        time.sleep(poll_s)


def launch(spec: LaunchSpec, log_path: Path, timeout_s: float = 600.0, *,
           die_with_parent: bool = False,
           on_tick: Callable[[float, str], None] | None = None) -> ServerHandle:
    """Start the server and wait until it is ready. A server that exits or does not answer in
    time is stopped (whatever it spawned with it) and the error shows its log tail; Ctrl-C
    while waiting stops it too."""
    handle = start(spec, log_path, die_with_parent=die_with_parent)
    try:
        wait_ready(handle, timeout_s, on_tick)
    except BaseException:
        stop(handle)
        raise
    return handle


@contextmanager
def running(spec: LaunchSpec, log_path: Path, timeout_s: float = 600.0, *,
            die_with_parent: bool = False,
            on_tick: Callable[[float, str], None] | None = None) -> Iterator[ServerHandle]:
    """Start, wait until ready, hand the server to the block, stop it when the block ends,
    however it ends."""
    handle = launch(spec, log_path, timeout_s, die_with_parent=die_with_parent, on_tick=on_tick)
    try:
        yield handle
    finally:
        stop(handle)


# Seconds a launched server may take to answer before it is stopped (a cold vLLM boot with
# compilation on 2 cores takes minutes): what Servers, the bench runner and the compile-cache
# A/B give each server they start.
READY_TIMEOUT_S = 900.0


class Servers:
    """Starts servers and keeps each one until it is stopped, so that the command that owns
    them stops every one on its way out (``stop_all``), whatever ended it. Its servers die with
    the command by default, even when it is killed outright.

    This is the launcher ``diagnose`` hands its experiments: ``start(spec, log)`` returns a
    ready ``ServerHandle`` (``.url``, ``.log_path``), ``stop(handle)`` stops it."""

    def __init__(self, timeout_s: float = READY_TIMEOUT_S, die_with_parent: bool = True) -> None:
        self.timeout_s = timeout_s
        self.die_with_parent = die_with_parent
        self.live: list[ServerHandle] = []

    def start(self, spec: LaunchSpec, log_path: Path) -> ServerHandle:
        handle = launch(spec, log_path, self.timeout_s, die_with_parent=self.die_with_parent)
        self.live.append(handle)
        return handle

    def stop(self, handle: ServerHandle) -> None:
        try:
            stop(handle)
        finally:
            if handle in self.live:
                self.live.remove(handle)

    def stop_all(self) -> None:
        for handle in list(self.live):
            try:
                self.stop(handle)
            except Exception:  # the next one must still be stopped
                log.exception("could not stop the server at %s", handle.url)

    @contextmanager
    def running(self, spec: LaunchSpec, log_path: Path) -> Iterator[ServerHandle]:
        """``start``, the block, ``stop``: one relaunch of an experiment."""
        handle = self.start(spec, log_path)
        try:
            yield handle
        finally:
            self.stop(handle)


def stop(handle: ServerHandle, grace_s: float = 20.0) -> None:
    """SIGTERM the server's whole process group, then SIGKILL what is left after the grace.

    The group is signalled even when the started process has exited (its workers may not
    have); then only the members that started with or after it are, so a pid reused since
    is never touched."""
    _STARTED.pop(handle.pid, None)
    if handle.alive():
        try:
            pgid = os.getpgid(handle.pid)
        except ProcessLookupError:
            pgid = None
        if pgid is not None:
            _stop_group(handle.pid, pgid, grace_s)
            return
    _reap(handle.pid)
    # The leader is gone; start_new_session made its pid the group's id.
    members = _group_members(handle.pid, handle.started_at)
    if members:
        _stop_pids(members, grace_s)


def _stop_group(leader: int, pgid: int, grace_s: float) -> None:
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(leader)  # a reaped leader leaves the group; a zombie one would keep it "alive"
        if not _group_alive(pgid):
            break
        time.sleep(0.25)
    else:
        _signal_group(pgid, signal.SIGKILL)
    _reap(leader)


def _stop_pids(pids: list[int], grace_s: float) -> None:
    for pid in pids:
        _signal_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for pid in pids:
            _reap(pid)
        pids = [p for p in pids if _pid_alive(p)]
        if not pids:
            return
        time.sleep(0.25)
    for pid in pids:
        _signal_pid(pid, signal.SIGKILL)
        _reap(pid)


def _group_members(pgid: int, not_before: float) -> list[int]:
    """Live pids in process group ``pgid`` that started at or after ``not_before`` (epoch s),
    read from /proc (Linux); elsewhere, none."""
    proc = Path("/proc")
    try:
        btime = next(float(ln.split()[1]) for ln in (proc / "stat").read_text().splitlines()
                     if ln.startswith("btime "))
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError):
        return []
    out = []
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[0] is the state (3rd field of stat), so field n of stat is fields[n - 3]
        if int(fields[2]) != pgid or fields[0] == "Z":
            continue
        if btime + int(fields[19]) / tick >= not_before - 2.0:
            out.append(int(d.name))
    return out


def _signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _pid_alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass  # not our child: fall through to a signal probe
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie answers signal 0; /proc tells the truth on Linux.
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return True
    return True


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return False  # unreachable, or no HTTP (garbage, HTTP/0.9, headers past the limits)


def port_in_use(host: str, port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tail(path: Path, n: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64_000))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def last_log_line(path: Path) -> str:
    lines = [ln for ln in tail(path, 5).splitlines() if ln.strip()]
    return lines[-1].strip()[:160] if lines else ""


def save_handle(handle: ServerHandle, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(handle.to_json(), indent=2) + "\n")
    tmp.replace(path)


def load_handle(path: Path) -> ServerHandle | None:
    try:
        return ServerHandle.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
