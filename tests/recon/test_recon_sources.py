"""Sources that need a tool: pip downloads (offline, from a local index) and a Docker engine."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from imagebuild import metadata, wheel

from specdoctor.errors import InputError
from specdoctor.recon.extract import extract


def test_pip_spec_downloads_the_wheel(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    wheel(index / "vllm-0.10.0-py3-none-any.whl",
          {"vllm/v1/spec_decode/eagle.py": b"# 0.10\n",
           "vllm-0.10.0.dist-info/METADATA": metadata("vllm", "0.10.0"),
           "vllm-0.10.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
           "vllm-0.10.0.dist-info/RECORD": b""})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    snap, _ = extract("pip:vllm==0.10.0", tmp_path / "out", ["vllm"])
    assert snap.source["kind"] == "pip"
    assert snap.source["spec"] == "vllm==0.10.0"
    assert [(p.name, p.version) for p in snap.packages] == [("vllm", "0.10.0")]
    with pytest.raises(InputError, match="pip could not download 'vllm==9.9.9'"):
        extract("pip:vllm==9.9.9", tmp_path / "out2", ["vllm"])


def _fake_docker(bindir: Path, script: str) -> None:
    bindir.mkdir()
    exe = bindir / "docker"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_docker_without_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker here
    with pytest.raises(InputError, match="docker save vllm/vllm-openai:v0.28.0 -o image.tar"):
        extract("docker://vllm/vllm-openai:v0.28.0", tmp_path / "out", ["vllm"])


def test_docker_cli_without_engine(tmp_path, monkeypatch):
    if shutil.which("docker") is None:
        _fake_docker(tmp_path / "bin", 'echo "Cannot connect to the Docker daemon" >&2; exit 1\n')
        monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + os.environ["PATH"])
    probe = os.popen("docker version --format '{{.Server.Version}}' 2>/dev/null").read().strip()
    if probe:
        pytest.skip("a Docker engine runs here")
    with pytest.raises(InputError, match="no Docker engine answers"):
        extract("docker://vllm/vllm-openai:v0.28.0", tmp_path / "out", ["vllm"])
    assert not (tmp_path / "out").exists()
