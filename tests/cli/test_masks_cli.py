"""`specdoctor masks diff|show` through the real entry point."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdoctor", "masks", *args],
                          capture_output=True, text=True, timeout=120)


def test_diff_json_identical_then_edge_difference():
    r = run("diff", "--impl", "fa2,flex", "--window", "4", "--causal", "false",
            "--ctx", "0..12", "--q", "8", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["identical"] and d["groups"] == [["fa2", "flex"]]
    assert all(c["found"] and len(c["sha256"]) == 64 for m in d["models"] for c in m["citations"])
    r = run("diff", "--impl", "fa2,flex", "--window", "4", "--ctx", "0..12",
            "--convention", "fa2=W,symmetric,<=", "--json")
    d = json.loads(r.stdout)
    assert not d["identical"]
    assert set(d["differences"][0]["distances"]) == {"4", "-4"}
    assert "edge diagonal" in d["differences"][0]["summary"]
    r = run("diff", "--impl", "fa2,flex", "--window", "4", "--ctx", "0..12",
            "--convention", "fa2=W,symmetric,<=")
    assert "differ" in r.stdout and "q-k" in r.stdout


def test_show_prints_bits():
    r = run("show", "--impl", "sdpa", "--causal", "true", "--ctx", "2", "--q", "2")
    assert r.returncode == 0, r.stderr
    assert "1..." in r.stdout and "11.." in r.stdout


def test_bad_arguments_are_one_line():
    for args, msg in ((("diff", "--ctx", "9..2"), "runs backwards"),
                      (("diff", "--impl", "fa3"), "unknown attention implementation"),
                      (("diff", "--window", "0"), "--window must be >= 1")):
        r = run(*args)
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_code_dir_fallback_to_the_installed_engine_is_said(tmp_path):
    flex = "vllm/v1/attention/backends/flex_attention.py"
    installed = importlib.util.find_spec("vllm").submodule_search_locations[0]
    dest = tmp_path / flex
    dest.parent.mkdir(parents=True)
    dest.write_bytes((Path(installed).parent / flex).read_bytes())
    r = run("diff", "--impl", "fa2,flex", "--window", "4", "--ctx", "0..4", "--code",
            str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    fb = json.loads(r.stdout)["read_from_installed_instead"]
    paths = [p for ps in fb.values() for p in ps]
    assert "vllm/v1/attention/backends/flash_attn.py" in paths and flex not in paths
    assert any(k.startswith("vllm") for k in fb)  # named with the installed distribution
    r = run("diff", "--impl", "fa2,flex", "--window", "4", "--ctx", "0..4", "--code", str(tmp_path))
    head = " ".join(r.stdout.split("┏")[0].split())  # the header, before the table
    assert f"not in {tmp_path}, read from the installed packages instead" in head
    assert "flash_attn.py" in head and "flex_attention.py" not in head
    # without --code nothing is a fallback
    r = run("diff", "--impl", "fa2,flex", "--window", "4", "--ctx", "0..4", "--json")
    assert json.loads(r.stdout)["read_from_installed_instead"] == {}
