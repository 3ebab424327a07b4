"""`specdoctor recon extract|diff|presets` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recon"))
from imagebuild import SITE, E, docker_archive, layer_tar, metadata, wheel  # noqa: E402

EAGLE = "vllm/v1/spec_decode/eagle.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def two_versions(tmp_path):
    old = b"def propose(k):\n    return k\n\n\ndef same():\n    pass\n"
    new = b"def propose(k):\n    return k + 1\n\n\ndef same():\n    pass\n"
    wheel(tmp_path / "vllm-0.10.0-py3-none-any.whl",
          {EAGLE: old, "vllm/v1/spec_decode/metrics.py": b"# metrics\n",
           "vllm/v1/spec_decode/ngram_proposer.py": b"# ngram\n",
           "vllm-0.10.0.dist-info/METADATA": metadata("vllm", "0.10.0")})
    docker_archive(tmp_path / "img.tar", [layer_tar([
        E(f"{SITE}/{EAGLE}", new),
        E(f"{SITE}/vllm/v1/spec_decode/metrics.py", b"# metrics\n"),
        E(f"{SITE}/vllm/v1/worker/gpu/spec_decode/ngram.py", b"# ngram\n"),  # moved
        E(f"{SITE}/vllm-0.28.0.dist-info/METADATA", metadata("vllm", "0.28.0")),
    ])])
    return tmp_path


def test_extract_json_and_diff(two_versions):
    t = two_versions
    r = run("recon", "extract", str(t / "img.tar"), "--pick", "vllm", "-o", str(t / "img"), "--json")
    assert r.returncode == 0, r.stderr
    manifest = json.loads(r.stdout)
    assert manifest["packages"][0]["version"] == "0.28.0"
    r = run("recon", "extract", str(t / "vllm-0.10.0-py3-none-any.whl"), "-o", str(t / "whl"))
    assert r.returncode == 0, r.stderr
    assert "vllm 0.10.0" in r.stdout

    r = run("recon", "diff", str(t / "whl"), str(t / "img"), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    status = {f["path"]: f["status"] for f in d["files"]}
    assert status[EAGLE] == "changed"
    assert status["vllm/v1/worker/gpu/spec_decode/ngram.py"] == "moved"
    assert "vllm/v1/spec_decode/metrics.py" not in status  # unchanged files are not listed
    eagle = next(f for f in d["files"] if f["path"] == EAGLE)
    assert "-    return k\n+    return k + 1" in eagle["diff"]
    assert (eagle["added_lines"], eagle["removed_lines"]) == (1, 1)

    r = run("recon", "diff", str(t / "whl"), str(t / "img"))
    assert "return k + 1" in r.stdout and "vllm 0.10.0" in r.stdout


def test_diff_against_a_source_extracts_it_with_the_same_picks(two_versions):
    t = two_versions
    assert run("recon", "extract", str(t / "img.tar"), "--pick", "vllm:proposers",
               "-o", str(t / "img")).returncode == 0
    r = run("recon", "diff", str(t / "img"), str(t / "vllm-0.10.0-py3-none-any.whl"), "--json",
            "--save", str(t / "saved"))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["b"]["source"]["kind"] == "wheel"
    assert (t / "saved" / "manifest.json").is_file()
    assert {f["path"] for f in d["files"] if f["status"] == "changed"} == {EAGLE}


def test_errors_are_one_line_with_a_fix(tmp_path):
    r = run("recon", "extract", str(tmp_path / "nope.tar"), "-o", str(tmp_path / "o"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    r = run("recon", "diff", str(tmp_path), str(tmp_path))
    assert r.returncode == 2 and "neither side is a snapshot" in r.stderr


def test_presets_lists_groups():
    r = run("recon", "presets", "--json")
    presets = json.loads(r.stdout)
    assert "vllm/v1/spec_decode/*.py" in presets["vllm"]["proposers"]
    assert "sglang" in presets


def test_diff_reports_a_file_edited_after_extraction(two_versions):
    t = two_versions
    whl = str(t / "vllm-0.10.0-py3-none-any.whl")
    for out in ("s1", "s2"):
        assert run("recon", "extract", whl, "-o", str(t / out)).returncode == 0
    r = run("recon", "diff", str(t / "s1"), str(t / "s2"), "--json")
    assert json.loads(r.stdout)["identical"] and json.loads(r.stdout)["edited_after_extraction"] == []
    # same source, same manifest sha256 on both sides: only the bytes on disk tell the edit
    (t / "s2" / EAGLE).write_text("def propose(k):\n    return k * 2\n\n\ndef same():\n    pass\n")
    (t / "s1" / "vllm/v1/spec_decode/metrics.py").unlink()
    r = run("recon", "diff", str(t / "s1"), str(t / "s2"), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    edited = {(e["side"], e["path"]): e for e in d["edited_after_extraction"]}
    assert set(edited) == {("b", EAGLE), ("a", "vllm/v1/spec_decode/metrics.py")}
    assert edited[("a", "vllm/v1/spec_decode/metrics.py")]["sha256"] is None
    eagle = next(f for f in d["files"] if f["path"] == EAGLE)
    assert eagle["status"] == "changed" and "+    return k * 2" in eagle["diff"]
    assert not d["identical"]
    r = run("recon", "diff", str(t / "s1"), str(t / "s2"))
    assert f"b: {EAGLE} was edited after extraction" in r.stdout
    assert "deleted after extraction" in r.stdout


def test_scan_limits_named_in_the_fix_are_flags(two_versions):
    t = two_versions
    r = run("recon", "extract", str(t / "img.tar"), "-o", str(t / "o"), "--max-members", "2")
    assert r.returncode == 2 and "more than 2 entries" in r.stderr and "raise --max-members" in r.stderr
    r = run("recon", "extract", str(t / "img.tar"), "-o", str(t / "o"), "--max-scanned-size", "10")
    assert r.returncode == 2 and "raise --max-scanned-size" in r.stderr, r.stderr
    assert run("recon", "extract", str(t / "img.tar"), "-o", str(t / "o"),
               "--max-members", "100", "--max-scanned-size", "1M").returncode == 0
