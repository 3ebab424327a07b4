"""Run a command, or a server launch, with a probe pack on, and keep its ``[probe]`` lines.

``pack_env`` is the whole switch: the pack's directory first on PYTHONPATH and its gate
variable set; every process the command starts inherits both. ``run_command`` runs a command to
its end (output passed through, kept in a log); ``with_pack`` turns a ``LaunchSpec`` into the
same launch with the pack on, for launch mode. ``collect`` reads the lines back from any log
(vLLM prefixes a worker's output with its process name; the line is found inside it).
Each run is stored under ``$SPECDOCTOR_HOME/probes/<time>-<pack>/``: the pack, the command,
the full log and ``lines.jsonl``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.launch import LaunchSpec
from specdoctor.packs import shipped
from specdoctor.packs import spec as specmod
from specdoctor.packs.build import BuiltPack, build
from specdoctor.paths import home

_LINE = re.compile(r"\[probe\] (\S+) (\{.*\})\s*$")


@dataclass(frozen=True)
class ProbeLine:
    probe: str
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe, "data": self.data}


@dataclass
class ProbeRun:
    pack: str
    command: list[str]
    returncode: int | None
    run_dir: Path
    log_path: Path
    lines: list[ProbeLine] = field(default_factory=list)

    def by_probe(self, name: str) -> list[dict[str, Any]]:
        return [ln.data for ln in self.lines if ln.probe == name]

    def errors(self) -> list[ProbeLine]:
        return [ln for ln in self.lines if "error" in ln.data]

    def to_json(self) -> dict[str, Any]:
        return {"pack": self.pack, "command": self.command, "returncode": self.returncode,
                "run_dir": str(self.run_dir), "log": str(self.log_path),
                "lines": [ln.to_json() for ln in self.lines]}


def parse_line(line: str) -> ProbeLine | None:
    m = _LINE.search(line)
    if not m:
        return None
    try:
        data = json.loads(m.group(2))
    except ValueError:
        return None
    return ProbeLine(m.group(1), data) if isinstance(data, dict) else None


def collect(text: str) -> list[ProbeLine]:
    """Every ``[probe]`` line in a log, in order; other lines are ignored."""
    out = []
    for line in text.splitlines():
        if "[probe]" in line:
            p = parse_line(line)
            if p is not None:
                out.append(p)
    return out


def pack_env(pack: BuiltPack, sink: Path | None = None,
             pythonpath: str | None = None) -> dict[str, str]:
    """Environment additions that turn the pack on (and point its sink at ``sink``)."""
    current = os.environ.get("PYTHONPATH", "") if pythonpath is None else pythonpath
    return {"PYTHONPATH": str(pack.dir) + (os.pathsep + current if current else ""),
            **_switch(pack, sink)}


def _switch(pack: BuiltPack, sink: Path | None) -> dict[str, str]:
    """The pack's gate (and its sink), PYTHONPATH aside."""
    env = {pack.gate: "1"}
    if pack.sink_env:
        if sink is None:
            raise InputError(f"pack {pack.name} writes to the file in ${pack.sink_env}",
                             "pass a sink path")
        env[pack.sink_env] = str(sink)
        env[pack.gate] = str(sink) if pack.gate == pack.sink_env else "1"
    return env


def with_pack(launch: LaunchSpec, pack: BuiltPack, sink: Path | None = None,
              after: bool = False) -> LaunchSpec:
    """The same launch with the pack on: first on PYTHONPATH (the launch's own entries kept
    behind it), or with ``after`` behind them, so that a runtime patch the launch serves with is
    installed first and the pack's probes see the engine as patched."""
    return launch.with_pythonpath(pack.dir, prepend=not after).with_env(_switch(pack, sink))


def prepare(spec_ref: str | Path, run_dir: Path | None = None) -> tuple[BuiltPack, Path]:
    """Build the pack of a spec (a shipped pack's name or a .toml path) into a new run dir."""
    spec = specmod.load(shipped.resolve(str(spec_ref)))
    if run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        # the name is a safe name (checked when the spec was read; checked again here, as it
        # becomes a folder): the run folder is one level below the store's probes folder
        name = specmod.safe_name(spec.name, "probe pack")
        run_dir = home() / "probes" / f"{stamp}-{os.getpid()}-{name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    return build(spec, run_dir / "pack"), run_dir


def run_command(spec_ref: str | Path, argv: Sequence[str], run_dir: Path | None = None,
                echo: bool = True, timeout_s: float | None = None) -> ProbeRun:
    """Run ``argv`` with the pack on; output goes through to stderr (if ``echo``) and into
    ``run_dir/output.log``; the probe lines are kept even when the command fails."""
    if not argv:
        raise InputError("no command to run", "write it after --: specdoctor probe run SPEC -- CMD")
    pack, run_dir = prepare(spec_ref, run_dir)
    log_path = run_dir / "output.log"
    sink = run_dir / "sink.log" if pack.sink_env else None
    env = {**os.environ, **pack_env(pack, sink)}
    (run_dir / "command.json").write_text(json.dumps({"argv": list(argv), "pack": pack.to_json()},
                                                     indent=2) + "\n")
    rc: int | None = None
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
        except OSError as exc:
            raise InputError(f"cannot start {argv[0]}: {exc}", "check the command") from exc
        assert proc.stdout is not None
        # The timeout is kept by a timer, not between lines: a command that prints nothing
        # is stopped on time too.
        timer = threading.Timer(timeout_s, proc.kill) if timeout_s is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            for chunk in iter(proc.stdout.readline, b""):
                log.write(chunk)
                if echo:
                    sys.stderr.write(chunk.decode("utf-8", "replace"))
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.kill()
            proc.wait()
            raise
        finally:
            if timer is not None:
                timer.cancel()
    return finish(pack, list(argv), rc, run_dir, log_path, sink)


def finish(pack: BuiltPack, argv: list[str], rc: int | None, run_dir: Path, log_path: Path,
           sink: Path | None = None) -> ProbeRun:
    """Collect the lines of a finished run (from its log, and its sink file if any) and store
    them as ``lines.jsonl`` beside the log."""
    text = log_path.read_text(errors="replace") if log_path.is_file() else ""
    if sink is not None and sink.is_file():
        text += "\n" + sink.read_text(errors="replace")
    lines = collect(text)
    with open(run_dir / "lines.jsonl", "w") as fh:
        fh.writelines(json.dumps(ln.to_json()) + "\n" for ln in lines)
    return ProbeRun(pack.name, argv, rc, run_dir, log_path, lines)
