"""`specdoctor masks diff|show` through the real entry point."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

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
