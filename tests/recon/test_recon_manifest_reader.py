"""A snapshot's manifest.json is input like any archive: the reader refuses member paths that
leave the snapshot (absolute, ``..``, through a symlink), as the writer does; nothing outside
the snapshot is read, and `recon diff` says which member, in one line, with exit 2."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.recon.diff import diff_snapshots
from specdoctor.recon.manifest import load_snapshot, member_path

SECRET = "root:SECRET-HASH:19000:0:99999:7:::\n"
GOOD = "vllm/v1/spec_decode/eagle.py"


def _snapshot(root: Path, paths: list[str], content: str = "def propose(k):\n    return k\n"
              ) -> Path:
    root.mkdir(parents=True)
    (root / "vllm/v1/spec_decode").mkdir(parents=True)
    (root / GOOD).write_text(content)
    files = []
    for p in paths:
        files.append({"path": p, "sha256": hashlib.sha256(b"x").hexdigest(), "size": 1,
                      "source_path": p, "layer": "tree"})
    (root / "manifest.json").write_text(json.dumps({
        "schema": "specdoctor.snapshot/1", "source": {"kind": "tree", "ref": str(root)},
        "packages": [], "picks": ["vllm"], "patterns": [], "files": files}))
    return root


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    s = tmp_path / "shadow"
    s.write_text(SECRET)
    return s


def _cases(tmp_path: Path, secret: Path) -> dict[str, list[str]]:
    return {"dotdot": [GOOD, "../shadow"], "deep-dotdot": ["vllm/../../shadow"],
            "absolute": [str(secret)], "empty-part": ["vllm//x.py"], "dot": ["./vllm/x.py"],
            "nul": ["vllm/x\x00.py"]}


@pytest.mark.parametrize("case", ["dotdot", "deep-dotdot", "absolute", "empty-part", "dot",
                                  "nul"])
def test_member_paths_that_leave_the_snapshot_are_refused(tmp_path, secret, case):
    paths = _cases(tmp_path, secret)[case]
    snap = _snapshot(tmp_path / "snap", paths)
    with pytest.raises(InputError, match="not a clean relative path") as err:
        load_snapshot(snap)
    assert repr(paths[-1]) in err.value.problem and "manifest.json" in err.value.problem


def test_a_symlink_inside_the_snapshot_is_not_followed(tmp_path, secret):
    snap = _snapshot(tmp_path / "snap", [GOOD, "vllm/linked/eagle.py", "vllm/direct.py"])
    (snap / "vllm" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "eagle.py").write_text(SECRET)
    (snap / "vllm" / "direct.py").symlink_to(secret)
    other = _snapshot(tmp_path / "other", [GOOD])
    with pytest.raises(InputError, match="symlink"):
        diff_snapshots(load_snapshot(snap), snap, load_snapshot(other), other)
    with pytest.raises(InputError, match="symlink"):
        member_path(snap, "vllm/direct.py")
    assert member_path(snap, GOOD) == snap.resolve() / GOOD


def test_recon_diff_prints_nothing_from_outside(tmp_path, secret):
    a = _snapshot(tmp_path / "a", [GOOD, "../shadow"])  # tmp/shadow: the secret
    b = _snapshot(tmp_path / "sub" / "b", [GOOD, "../shadow"])  # tmp/sub/shadow: other text
    (tmp_path / "sub" / "shadow").write_text("nothing\n")
    for args in ([str(a), str(b)], [str(b), str(a), "--json"]):
        r = subprocess.run([sys.executable, "-m", "specdoctor", "recon", "diff", *args],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "200"})
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert "SECRET-HASH" not in r.stdout + r.stderr
        assert "Traceback" not in r.stderr and "not a clean relative path" in r.stderr
