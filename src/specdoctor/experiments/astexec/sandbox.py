"""Run a cut in a separate, limited process: the code is the engine's, and it is untrusted.

- a fresh interpreter (`python -I`): no user site, no PYTHON* variables, no cwd on sys.path;
- an empty environment (no tokens, no proxies) and a private temporary working directory
  (HOME and TMPDIR point there);
- its own session and process group, so a signal to specdoctor's group does not come from it;
- where specdoctor runs as root, the code runs as ``nobody``: the kernel then refuses it any
  signal to specdoctor and any write to specdoctor's files (the runner drops the user after
  the interpreter and the config class are loaded, before the cut's code runs);
- always an audit hook that refuses file-system changes outside the working directory, signals
  to other processes, sockets and subprocesses (a net: code calling libc through ctypes gets
  past a hook, not past the kernel);
- limits: CPU seconds, address space, file size, open files, and processes when the user is
  dropped; a wall-clock timeout that kills the whole process group;
- no network: a new network namespace when the kernel allows one (root, or unprivileged
  user namespaces), and always the audit hook.
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError

RUNNER = Path(__file__).with_name("runner.py")
MARKER = "@@ASTEXEC-RESULT@@"
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


MAX_TIMEOUT_S = 24 * 3600.0
UNPRIVILEGED = "nobody"
MAX_PROCESSES = 256  # of the unprivileged user, threads included: no fork bomb
MEMORY_MB = (64, 1 << 20)  # below 64 MiB Python itself cannot start; 1 TiB is past any machine


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 60.0
    memory_mb: int = 4096
    file_mb: int = 64
    open_files: int = 1024

    def __post_init__(self) -> None:
        # refused here, in words, rather than by setrlimit inside the child
        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InputError(f"timeout {self.timeout_s} s is out of range",
                             f"give --timeout in seconds, above 0 and at most {MAX_TIMEOUT_S:g}")
        if not MEMORY_MB[0] <= self.memory_mb <= MEMORY_MB[1]:
            raise InputError(f"memory limit {self.memory_mb} MiB is out of range",
                             f"give --memory-mb from {MEMORY_MB[0]} to {MEMORY_MB[1]}")


def _limit(which: int, value: int) -> None:
    """Set a limit, never above the one this process already runs under (raising a hard
    limit needs privileges: under `ulimit -v 2000000` the sandbox gets 2 GB, not an error)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def unprivileged_user() -> tuple[int, int] | None:
    """(uid, gid) of ``nobody`` when specdoctor runs as root; None otherwise (a user that is
    not root cannot become another one)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _preexec(limits: SandboxLimits, isolation_fd: int, dropping: bool) -> None:
    """In the child, before exec: its own session and process group, limits, a network
    namespace (made while still root; the runner drops the user afterwards)."""
    os.setsid()
    if dropping:
        _limit(resource.RLIMIT_NPROC, MAX_PROCESSES)
    _limit(resource.RLIMIT_CPU, int(limits.timeout_s) + 1)
    _limit(resource.RLIMIT_AS, limits.memory_mb << 20)
    _limit(resource.RLIMIT_FSIZE, limits.file_mb << 20)
    _limit(resource.RLIMIT_NOFILE, limits.open_files)
    _limit(resource.RLIMIT_CORE, 0)
    how = b"audit-hook"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            how = b"netns"
        elif libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
            how = b"userns+netns"
    except Exception:  # noqa: BLE001 - the audit hook still blocks sockets
        pass
    os.write(isolation_fd, how)
    os.close(isolation_fd)


def run_job(job: dict[str, Any], limits: SandboxLimits) -> dict[str, Any]:
    """Run the job in the sandbox; returns the runner's result plus how it was isolated."""
    with tempfile.TemporaryDirectory(prefix="specdoctor-astexec-") as home:
        drop = unprivileged_user()
        if drop is not None:
            os.chown(home, *drop)  # the one folder the unprivileged user may write
        job = {**job, "home": os.path.realpath(home), "drop_to": list(drop) if drop else None}
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=home, env=env, text=True, pass_fds=(write_fd,),
                preexec_fn=lambda: _preexec(limits, write_fd, drop is not None),
            )
        finally:
            os.close(write_fd)
        try:
            out, err = proc.communicate(json.dumps(job), timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            os.close(read_fd)
            raise InputError(f"the code ran past the {limits.timeout_s:.0f} s limit",
                             "raise --timeout, or call something that finishes") from None
        isolation = os.read(read_fd, 64).decode() or "unknown"
        os.close(read_fd)
    result = _parse(out, err, proc.returncode, limits)
    user = result.pop("user", "unchanged")
    result["isolation"] = {
        "network": isolation, "env": "empty", "memory_mb": limits.memory_mb,
        "timeout_s": limits.timeout_s,
        "user": UNPRIVILEGED if user == "nobody" else (
            "unchanged (specdoctor is not root)" if os.geteuid() != 0
            else f"unchanged (no user {UNPRIVILEGED})"),
        "files": "writes only in a private temporary folder"
                 + (" (kernel: unprivileged user; audit hook)" if user == "nobody"
                    else " (audit hook only)"),
        "signals": "own session; signals to other processes refused"
                   + (" (kernel: unprivileged user; audit hook)" if user == "nobody"
                      else " (audit hook only)"),
    }
    return result


def _parse(out: str, err: str, rc: int, limits: SandboxLimits) -> dict[str, Any]:
    if MARKER in out:
        result: dict[str, Any] = json.loads(out.rsplit(MARKER, 1)[1])
        if not result.get("ok"):
            e = result.get("error", {})
            if e.get("type") == "MemoryError":
                raise InputError(f"the code ran out of its {limits.memory_mb} MiB",
                                 "raise --memory-mb")
            raise InputError(f"the sandboxed run failed: {e.get('type')}: {e.get('message')}",
                             "see the message; a --config-class must be importable here")
        return result
    tail = (err.strip().splitlines() or ["no output"])[-1]
    if rc in (-signal.SIGXCPU, -signal.SIGKILL) or "MemoryError" in err:
        why = "memory" if "MemoryError" in err else "CPU time"
        raise InputError(f"the sandboxed process was stopped ({why} limit): {tail}",
                         "raise --memory-mb or --timeout")
    raise InputError(f"the sandboxed process died (exit {rc}): {tail}",
                     "run with a smaller cut, or check the stubs")
