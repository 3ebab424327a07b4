"""The ``specdoctor`` command line run as a user types it, for the gate's benchmarks.

A fresh ``$SPECDOCTOR_HOME`` and store per session (the lab's built models are shared), each
command's argv, exit status, seconds and output kept; machine paths are shortened to the
variables a reader knows (``$SPECDOCTOR_HOME``, ``$MODELS``, ``$REPO`` (this checkout),
``python3``, ``$PREFIX``), so the committed transcripts name no machine.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RECORDED_BENCH = re.compile(r"benchmark run (\d+):")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Session:
    """Runs ``specdoctor`` commands in one fresh home and keeps what each printed."""

    def __init__(self, prefix: str) -> None:
        from specdoctor import paths

        self.work = Path(tempfile.mkdtemp(prefix=prefix))
        self.home = self.work / "home"
        self.models = paths.models_dir()
        path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        self.env = {**os.environ, "SPECDOCTOR_HOME": str(self.home),
                    "SPECDOCTOR_MODELS": str(self.models), "COLUMNS": "400", "NO_COLOR": "1",
                    "HF_HUB_OFFLINE": "1",
                    "PYTHONPATH": os.pathsep.join(
                        [str(ROOT / "src"), *[p for p in path if p != str(ROOT / "src")]])}
        self.env.pop("SPECDOCTOR_DB", None)  # the store of the fresh home: ids start at 1
        self.shorten = [(str(self.home), "$SPECDOCTOR_HOME"), (str(self.models), "$MODELS"),
                        (str(self.work) + os.sep, ""), (str(ROOT), "$REPO"),
                        (sys.executable, "python3"), (sys.prefix, "$PREFIX")]
        self.steps: list[dict[str, Any]] = []
        self.last_output = ""  # the last command's stdout and stderr, paths not shortened

    def short(self, text: str) -> str:
        for long, var in self.shorten:
            text = text.replace(long, var)
        return text

    def run(self, *args: str, timeout: float = 3600, keep: bool = True) -> dict[str, Any]:
        argv = [sys.executable, "-m", "specdoctor", *args]
        log("specdoctor " + " ".join(args[:4]) + " …")
        t0 = time.perf_counter()
        load = round(os.getloadavg()[0], 1)
        p = subprocess.run(argv, env=self.env, cwd=self.work, capture_output=True, text=True,
                           timeout=timeout, check=False)
        step = {"command": self.short("specdoctor " + shlex.join(args)),
                "returncode": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
                "load_before": load, "load_after": round(os.getloadavg()[0], 1),
                "stdout": self.short(p.stdout),
                # lab up's stderr is its boot progress, wrapped to the terminal's width (a
                # wrapped path escapes shortening): not kept
                "stderr": "" if args[:1] == ("lab",) else self.short(p.stderr)}
        self.last_output = p.stdout + p.stderr
        if keep:
            self.steps.append(step)
        log(f"  exit {p.returncode} in {step['seconds']} s")
        if p.returncode not in (0, 1):
            log(p.stderr[-1500:])
        return step


def bench_run_id(step: dict[str, Any]) -> int:
    m = RECORDED_BENCH.search(step["stderr"])
    if m is None:
        raise SystemExit(f"no bench run in: {step['command']}\n{step['stderr'][-1500:]}")
    return int(m.group(1))


def transcript(header: list[str], steps: list[dict[str, Any]]) -> str:
    out = [*header, ""]
    for s in steps:
        out.append(f"$ {s['command']}")
        out.append(f"# exit {s['returncode']}, {s['seconds']} s, load average "
                   f"{s['load_before']} → {s['load_after']}")
        if s["stdout"].strip():
            out.append(s["stdout"].rstrip("\n"))
        out.append("")
    return "\n".join(out) + "\n"
