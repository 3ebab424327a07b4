"""Where a benchmark figure comes from: the commit, the date, the machine and its load.

Imported by the scripts beside it (``python benchmarks/NAME.py`` puts this folder on
sys.path), so every results file states its origin the same way.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str:
    """Short hash of HEAD, with ``+dirty`` when src/ or benchmarks/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src",
                                "benchmarks/*.py"], capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> str:
    return f"{cpu_model()}, {platform.machine()}, {os.cpu_count()} cores"


def machine_paths() -> list[tuple[str, str]]:
    """Paths of this machine a results file shows as names a reader knows, longest first:
    the specdoctor home and models folder, the temp folder, this checkout, Python's prefix."""
    import sys
    import tempfile

    from specdoctor import paths

    pairs = [(str(paths.home()), "$SPECDOCTOR_HOME"), (str(paths.models_dir()), "$MODELS"),
             (tempfile.gettempdir(), "$TMP"), (str(ROOT), "$REPO"),
             (sys.executable, "python3"), (sys.prefix, "$PREFIX"),
             (sys.base_prefix, "$PREFIX")]
    return sorted(pairs, key=lambda p: -len(p[0]))


def scrub(text: str) -> str:
    """``text`` with this machine's paths written as ``machine_paths`` names them."""
    for long, name in machine_paths():
        text = text.replace(long, name)
    return text


def load() -> float:
    return round(os.getloadavg()[0], 1)
