"""No traceback, ever, and one exit status per kind of failure, over every command and option.

tests/cli/fuzz.py gives every parameter of every command hostile values of its kind (huge,
negative, empty, binary, NUL-only, wrong-type files, missing paths, directories, broken model
directories). Each command's cases run in one child process with its address space capped at
MEMORY_LIMIT, so a size that would not fit shows as a failure here instead of a machine out of
memory. Judged:

- no exception escapes (no traceback) and no "internal error" line (a bug caught by main);
- every exit status is one of README's table (0-5);
- the same bad input gets the same status everywhere: an unknown or huge id, and a missing,
  binary, NUL-only, empty or unreadable input file are bad input (2) in every command that
  reads one.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.cli.main import COMMANDS
from tests.cli import fuzz
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 4 << 30
STATUSES = {0, 1, 2, 3, 4, 5}
# Parameters that read a file the user gives: these contents are bad input (2) everywhere.
REFUSED = {"binary", "nul", "missing"}
INPUT_FILES: dict[str, set[str]] = {
    "logs files": REFUSED | {"empty", "directory", "json", "text"},
    "metrics source": REFUSED | {"empty", "directory", "json", "text"},
    "diagnose logs": REFUSED | {"empty", "directory", "json", "text"},
    "diagnose reference": REFUSED | {"empty", "directory", "json", "text"},
    "kernels check suite": REFUSED | {"empty", "directory", "json", "text"},
    "probe lines log": REFUSED | {"directory"},
    "audit launch log_path": REFUSED | {"directory"},
    "cache scan logs": REFUSED | {"directory"},
    "oracle vocab_map": REFUSED | {"empty", "directory", "json", "text"},
    "oracle target": REFUSED | {"empty", "directory", "json", "text", *fuzz.MODELS},
    "astexec config_path": REFUSED | {"empty", "directory", "text"},
    "bench dataset": REFUSED | {"empty", "directory", "json", "text"},
    "sweep dataset": REFUSED | {"empty", "directory", "json", "text"},
    "taps check directory": REFUSED | {"empty", "json", "text"},
    "gate baseline_ref": REFUSED | {"empty", "directory", "json", "text"},
}


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def fuzz_command(top: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "tests.cli.fuzz", top], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=900, preexec_fn=_cap_memory)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def judge(cases: list[dict]) -> list[str]:
    """What is wrong with these outcomes, one line per case."""
    bad = []
    for c in cases:
        where = f"specdoctor {' '.join(c['argv'])}"
        if c["traceback"]:
            bad.append(f"{where}: traceback\n{c['traceback'][-800:]}")
        elif fuzz.INTERNAL_MARK in c["stderr"]:
            bad.append(f"{where}: {c['stderr'].strip()[-400:]}")
        elif c["code"] not in STATUSES:
            bad.append(f"{where}: exit {c['code']}, not in README's table")
        elif c["value"] in INPUT_FILES.get(c["param"], ()) and c["code"] != 2:
            bad.append(f"{where}: exit {c['code']} for a {c['value']} input file (bad input is 2)")
        elif c["value"] == "huge-id" and (c["code"] != 2 or "no " not in c["stderr"]):
            bad.append(f"{where}: exit {c['code']} for an id no store holds (expected 2, 'no …')")
    return bad


@pytest.mark.parametrize("top", sorted(COMMANDS))
def test_hostile_values_never_crash(top):
    cases = fuzz_command(top)
    assert cases, f"no case was generated for {top}"
    bad = judge(cases)
    assert not bad, f"{len(bad)} of {len(cases)} cases of `{top}` failed:\n" + "\n".join(bad)


def test_the_judge_sees_a_traceback_brought_back(monkeypatch, tmp_path):
    # the huge-id overflow as it was before the store bounded its keys: seen, and named
    from specdoctor.store import db

    monkeypatch.setattr(db, "row_key", lambda n: n)
    monkeypatch.setenv("SPECDOCTOR_DB", str(tmp_path / "store.db"))
    code, tb, stderr = fuzz.run(["runs", fuzz.HUGE], tmp_path)
    case = {"argv": ["runs", fuzz.HUGE], "param": "runs run_id", "value": fuzz.HUGE,
            "code": code, "traceback": tb, "stderr": stderr}
    (problem,) = judge([case])
    assert "OverflowError" in problem and "internal error" in problem
    monkeypatch.setenv("SPECDOCTOR_TRACEBACK", "1")  # and with the traceback on, it escapes
    code, tb, _ = fuzz.run(["runs", fuzz.HUGE], tmp_path)
    assert tb is not None and "OverflowError" in tb


def test_a_wrong_status_and_an_accepted_binary_file_are_named():
    ok = {"argv": ["logs", "x"], "param": "logs files", "value": "binary", "code": 2,
          "traceback": None, "stderr": "error: x is a binary file"}
    assert judge([ok]) == []
    assert "exit 0 for a binary input file" in judge([{**ok, "code": 0}])[0]
    assert "not in README's table" in judge([{**ok, "value": "x", "code": 70}])[0]


@pytest.mark.parametrize("args, needle", [
    (["runs", fuzz.HUGE], "no run"),
    (["masks", "diff", "--ctx", "0..100000000"], "past the limit"),
    (["measure", "--url", fuzz.DEAD, "-n", fuzz.HUGE], "must be from 1 to 100,000"),
])
def test_a_sample_in_a_real_process(args, needle):
    # the same outcomes as in-process, through the console entry point a user runs
    proc = run_cli(*args, timeout=120)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
