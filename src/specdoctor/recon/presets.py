"""Presets: the speculative-decoding code path of each engine, as package-path globs.

The path moves between versions (vLLM grew `vllm/config/` out of `config.py`,
V0 spec decode lived in `vllm/spec_decode/`), so each group lists the old and
new places; globs that match nothing in a given version cost nothing.

`--pick vllm` takes every group; `--pick vllm:attention` one group.
Each preset also picks its distribution's METADATA, which gives the snapshot
its package version.
"""

from __future__ import annotations

DEFAULT_PICKS = ("vllm",)  # what `recon extract` takes when no --pick is given

PRESETS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "metrics": (
            "vllm/v1/spec_decode/metrics.py",
            "vllm/spec_decode/metrics.py",
            "vllm/v1/metrics/loggers.py",
        ),
        "config": (
            "vllm/config/speculative.py",
            "vllm/config/parallel.py",
            "vllm/config/compilation.py",
            "vllm/config/__init__.py",
            "vllm/config.py",
        ),
        "proposers": (
            "vllm/v1/spec_decode/*.py",
            "vllm/v1/worker/gpu/spec_decode/**/*.py",
            "vllm/v1/sample/rejection_sampler.py",
            "vllm/spec_decode/*.py",
        ),
        "models": (
            "vllm/model_executor/models/*dflash*.py",
            "vllm/model_executor/models/*eagle*.py",
            "vllm/model_executor/models/*mtp*.py",
            "vllm/model_executor/models/medusa.py",
            "vllm/transformers_utils/configs/speculators/*.py",
            "vllm/transformers_utils/configs/eagle.py",
        ),
        "attention": (
            "vllm/v1/attention/backends/{flash_attn,flex_attention,triton_attn,cpu_attn,"
            "flashinfer,utils,registry}.py",
            "vllm/v1/attention/backend.py",
            "vllm/v1/attention/ops/{triton_unified_attention,triton_attention_helpers}.py",
            "vllm/vllm_flash_attn/flash_attn_interface.py",
            "vllm/attention/backends/{flash_attn,torch_sdpa,abstract}.py",
            "vllm/attention/layer.py",
        ),
        "compile-cache": (
            "vllm/compilation/{backends,caching,compiler_interface,decorators,wrapper}.py",
            "vllm/envs.py",
        ),
        "runner": (
            "vllm/v1/worker/gpu_model_runner.py",
        ),
        "dist": ("vllm*.dist-info/METADATA",),
    },
    "sglang": {
        "metrics": (
            "sglang/srt/managers/scheduler*.py",
            "sglang/srt/metrics/collector.py",
        ),
        "config": ("sglang/srt/server_args.py",),
        "proposers": ("sglang/srt/speculative/*.py",),
        "models": (
            "sglang/srt/models/*{eagle,mtp,nextn,dflash}*.py",
        ),
        "attention": (
            "sglang/srt/layers/attention/{flashattention_backend,flashinfer_backend,triton_backend,"
            "torch_native_backend,torch_flex_backend}.py",
            "sglang/srt/layers/radix_attention.py",
        ),
        "compile-cache": (
            "sglang/srt/model_executor/{model_runner,cuda_graph_runner,forward_batch_info}.py",
        ),
        "dist": ("sglang*.dist-info/METADATA",),
    },
}


def expand_preset(pick: str) -> tuple[str, ...] | None:
    """Globs for `name` or `name:group`; None when `pick` is not a preset."""
    name, _, group = pick.partition(":")
    groups = PRESETS.get(name)
    if groups is None:
        return None
    if not group:
        return tuple(g for globs in groups.values() for g in globs)
    if group not in groups:
        from specdoctor.errors import InputError

        raise InputError(f"preset {name!r} has no group {group!r}",
                         f"use one of {', '.join(f'{name}:{g}' for g in groups)}")
    return groups[group] + groups["dist"]
