"""The suite runs on x86 CPUs with and without AVX-512: a test that needs an instruction set
skips with vLLM's own reason, and nothing loads vLLM's compiled extension past its dispatch.

This machine's CPU decides only one branch of each; the other is simulated by answering
torch's feature queries (the ones vLLM itself asks) as an AVX2-only CPU would."""

from __future__ import annotations

import builtins
import importlib.util
import re
from pathlib import Path

import pytest

from tests import cpu_isa

ROOT = Path(__file__).resolve().parents[1]
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")


def _cpu(monkeypatch: pytest.MonkeyPatch, avx512: bool, bf16: bool = False, amx: bool = False) -> None:
    import torch

    # this CPU's own build loaded first, with its real answers: a module imported while the
    # answers are simulated would load the simulated CPU's build into this process for good
    import vllm._custom_ops  # noqa: F401
    import vllm.v1.attention.backends.cpu_attn  # noqa: F401

    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: avx512)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)


@needs_vllm
def test_fp8_kv_cache_is_skipped_on_an_avx2_cpu_with_vllms_reason(monkeypatch):
    _cpu(monkeypatch, avx512=False)
    why = cpu_isa.fp8_kv_cache_missing()
    assert why is not None and "AVX-512 or AMX" in why
    _cpu(monkeypatch, avx512=True)
    assert cpu_isa.fp8_kv_cache_missing() is None
    _cpu(monkeypatch, avx512=False, amx=True)
    assert cpu_isa.fp8_kv_cache_missing() is None


@needs_vllm
@pytest.mark.parametrize("avx512, bf16, build", [(False, False, "vllm._C_AVX2"),
                                                 (True, False, "vllm._C_AVX512"),
                                                 (True, True, "vllm._C")])
def test_the_kernel_loader_asks_vllm_which_build_this_cpu_runs(monkeypatch, avx512, bf16, build):
    # run cpu_isa.KERNELS with the imports recorded, not performed: on an AVX2-only CPU it
    # asks for _C_AVX2, never for the AVX-512 build that would die with SIGILL
    from vllm.platforms import cpu as cpu_platform

    monkeypatch.setattr(cpu_platform.Platform, "get_cpu_architecture",
                        classmethod(lambda cls: cpu_platform.CpuArchEnum.X86))
    _cpu(monkeypatch, avx512=avx512, bf16=bf16)
    asked: list[str] = []
    real_import = builtins.__import__

    def record(name, globals=None, locals=None, fromlist=(), level=0):
        if name.startswith("vllm._C"):
            asked.append(name)
            return None
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", record)
    monkeypatch.setattr("vllm.platforms.current_platform", cpu_platform.CpuPlatform(), raising=False)
    exec(cpu_isa.KERNELS, {})
    assert asked == [build]


def test_nothing_imports_vllms_compiled_extension_by_name():
    direct = re.compile(r"^\s*(import\s+vllm\._C\w*|from\s+vllm\s+import\s+_C\w*|from\s+vllm\._C\w*\s+import)",
                        re.M)
    found = [f"{p.relative_to(ROOT)}" for d in ("src", "tests", "benchmarks", "scripts")
             for p in (ROOT / d).rglob("*.py") if p.name != "test_cpu_isa.py"
             and direct.search(p.read_text(errors="replace"))]
    assert not found, f"load vLLM's kernels through tests/cpu_isa.KERNELS (its dispatch): {found}"
    assert direct.search("x = 1\nimport vllm._C  # registers torch.ops._C\n")  # the check sees one
