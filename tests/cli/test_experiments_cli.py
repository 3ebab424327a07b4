"""probe / audit / cache commands as a user types them: bad input ends in a message naming the
fix (never a traceback), and the happy paths print what the library found."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def _fails_cleanly(proc, words: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert words in proc.stderr, proc.stderr


def test_probe_bad_inputs(tmp_path):
    _fails_cleanly(run_cli("probe", "build", str(tmp_path / "nope.toml"), "-o", str(tmp_path / "o")),
                   "no probe spec")
    _fails_cleanly(run_cli("probe", "run", "no-such-pack", "--", "true"), "no probe pack")
    proc = run_cli("probe", "lines", str(tmp_path / "missing.log"))
    _fails_cleanly(proc, "no such file")
    assert proc.returncode == 2 and "missing.log" in proc.stderr
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe[[probe]]")
    _fails_cleanly(run_cli("probe", "build", str(bad), "-o", str(tmp_path / "o")),
                   "cannot read probe spec")


def test_probe_build_and_lines(tmp_path):
    proc = run_cli("probe", "build", "startup", "-o", str(tmp_path / "pack"), "--json")
    assert proc.returncode == 0, proc.stderr
    built = json.loads(proc.stdout)
    assert built["gate"] == "SPECDOCTOR_PROBES"
    assert (tmp_path / "pack" / "sitecustomize.py").is_file()
    log = tmp_path / "server.log"
    log.write_text('(EngineCore pid=7) [probe] accepted {"drafted": 3, "accepted": 2}\n'
                   "INFO unrelated\n[probe] broken {not json\n")
    out = json.loads(run_cli("probe", "lines", str(log), "--json").stdout)
    assert out["lines"] == [{"probe": "accepted", "data": {"drafted": 3, "accepted": 2}}]


def test_audit_bad_inputs_and_launch_lints(tmp_path):
    _fails_cleanly(run_cli("audit", "models", str(tmp_path), str(tmp_path)), "no config.json")
    proc = run_cli("audit", "launch", "--k", "4", "--cudagraph-sizes", "1,2,4",
                   "--max-cudagraph", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    lints = json.loads(proc.stdout)["lints"]
    assert [x["level"] for x in lints] == ["problem"]
    _fails_cleanly(run_cli("audit", "launch", "--k", "2", "--cudagraph-sizes", "1,x"),
                   "--cudagraph-sizes")


def test_cache_ab_needs_a_launch():
    _fails_cleanly(run_cli("cache", "ab"), "no launch to run")
    _fails_cleanly(run_cli("cache", "ab", "--", "python3", "-m", "server"), "pass --port")
