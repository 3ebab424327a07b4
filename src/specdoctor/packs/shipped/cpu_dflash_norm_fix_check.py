"""Does the ``cpu-dflash-norm-fix`` verdict patch apply to this engine? Run by
``packs.verdicts`` with the engine's own Python and the launch's environment; prints one JSON
object.

Three questions, each answered on the installed code, never on a server's label:

1. ``form``: the method the patch replaces,
   ``vllm.model_executor.models.qwen3_dflash.DFlashQwen3Model._normalize_context_k``, exists
   and has the grouped form: one ``rms_norm`` call whose weight is an attribute of the model
   (the stacked [layers, head_dim] k_norm weights), not a row of it (read from the module's
   source with ``ast``; nothing is imported for it). Whether the method also holds a per-layer
   loop is reported beside it. The file and its sha256 are given, for the citation.
2. ``platform``: the server would take this path with the CPU kernel: vLLM's platform, as the
   launch's environment resolves it, is the CPU (CUDA's kernel takes a weight per row).
3. ``behaves``: called as DFlash calls it, on the context K of two layers with their two k_norm
   weights stacked, does the method in force norm layer 1 with layer 0's weight? In force means
   after the launch's PYTHONPATH: a patch already served replaces it, and then the answer is no.
   The op itself, called directly on the same stack, is reported beside it (``op``).

Standard library, torch and vLLM only: this file runs inside the engine's environment.
"""

import ast
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # beside its shared helpers

from _check_common import ast_name, report, vllm_file  # noqa: E402

TARGET_MODULE = "vllm.model_executor.models.qwen3_dflash"
TARGET_CLASS = "DFlashQwen3Model"
TARGET_FUNCTION = "_normalize_context_k"
CLOSE = 1e-4   # max |diff| under which two normed tensors are the same numbers (float32)


def _source_file():
    return vllm_file("model_executor", "models", "qwen3_dflash.py")


def _weight_arg(call):
    if len(call.args) >= 3:
        return call.args[2]
    return next((kw.value for kw in call.keywords if kw.arg == "weight"), None)


def form(path):
    """The method's form in the source: found, and whether it norms with the stacked weight."""
    text = open(path, "rb").read()
    out = {"file": path, "sha256": hashlib.sha256(text).hexdigest(), "function": False,
           "defect_form": False}
    tree = ast.parse(text.decode("utf-8", "replace"))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef)
                and n.name == TARGET_CLASS), None)
    fn = None if cls is None else next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == TARGET_FUNCTION),
        None)
    if fn is None:
        return out
    out["function"] = True
    out["line"] = fn.lineno
    me = fn.args.args[0].arg if fn.args.args else "self"
    grouped = per_layer = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and ast_name(node.func) == "rms_norm":
            w = _weight_arg(node)
            # self.<stack> as the weight: one call for every layer
            if isinstance(w, ast.Attribute) and isinstance(w.value, ast.Name) \
                    and w.value.id == me:
                grouped = True
                out["weight"] = f"{me}.{w.attr}"
            # self.<stack>[i] or a layer's own weight: one call per layer
            elif isinstance(w, (ast.Subscript, ast.Attribute)):
                per_layer = True
        if isinstance(node, (ast.For, ast.While, ast.comprehension)):
            per_layer = per_layer or any(isinstance(c, ast.Call) and ast_name(c.func) == "rms_norm"
                                         for c in ast.walk(node))
    out["grouped"] = grouped
    out["per_layer"] = per_layer
    out["defect_form"] = grouped
    return out


def _ref(x, w, eps):
    import torch

    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).float()


def _diffs(out, x, w, eps):
    """Layer 1's max |diff| from its own weight's norm and from layer 0's weight's."""
    own = float((out[1] - _ref(x[1], w[1], eps)).abs().max())
    first = float((out[1] - _ref(x[1], w[0], eps)).abs().max())
    layer0 = float((out[0] - _ref(x[0], w[0], eps)).abs().max())
    return {"layer0_vs_own": round(layer0, 7), "layer1_vs_own": round(own, 7),
            "layer1_vs_layer0_weight": round(first, 7),
            "defect": not (own < CLOSE and layer0 < CLOSE),
            "row0_everywhere": first < CLOSE and own >= CLOSE}


def behaves():
    """Call the method in force (and the op) on two layers' context K with stacked weights."""
    try:
        import types

        import torch
        from vllm.platforms.cpu import CpuPlatform

        CpuPlatform.import_kernels()
        from vllm import _custom_ops as ops
        from vllm.model_executor.models import qwen3_dflash as mod

        eps = 1e-6
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 5, 2, 32, generator=g)          # [layers, ctx, kv heads, head_dim]
        w = (1.0 + 0.5 * torch.randn(2, 32, generator=g)).contiguous()
        model = types.SimpleNamespace(_k_norm_weights=w, _rms_norm_eps=eps)
        fn = getattr(getattr(mod, TARGET_CLASS), TARGET_FUNCTION)
        got = fn(model, x)
        op_out = torch.empty_like(x)
        ops.rms_norm(op_out, x, w, eps)
        res = {"ran": True, "shape": list(x.shape), **_diffs(got, x, w, eps),
               "patched": bool(getattr(fn, "__specdoctor_probes__", ())),
               "op": _diffs(op_out, x, w, eps)}
        return res
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"ran": False, "error": f"{type(exc).__name__}: {exc}"}


def main():
    report(TARGET_MODULE, f"{TARGET_CLASS}.{TARGET_FUNCTION}", _source_file(), form, behaves)


if __name__ == "__main__":
    main()
