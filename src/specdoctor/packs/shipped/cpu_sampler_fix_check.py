"""Does the ``cpu-sampler-fix`` verdict patch apply to this engine? Run by ``packs.verdicts``
with the engine's own Python and the launch's environment; prints one JSON object.

Three questions, each answered on the installed code, never on a server's label:

1. ``form``: the function the patch replaces, ``vllm.utils.cpu_triton_utils._expand_kernel_impl``,
   exists and has the defect's form: it hands ``_ensure_int64(output)`` to the kernel and never
   copies that back into ``output`` (read from the module's source with ``ast``; nothing is
   imported for it). The file and its sha256 are given, for the citation.
2. ``platform``: the server would take this path: vLLM's platform, as the launch's environment
   resolves it, is the CPU (elsewhere Triton runs the rejection sampler's kernels).
3. ``behaves``: called as the rejection sampler calls it, on a float32 output, does the function
   in force leave the output unwritten? In force means after the launch's PYTHONPATH: a patch
   already served replaces it, and then the answer is no.

Standard library, torch and vLLM only: this file runs inside the engine's environment.
"""

import ast
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # beside its shared helpers

from _check_common import ast_name, report, vllm_file  # noqa: E402

TARGET_MODULE = "vllm.utils.cpu_triton_utils"
TARGET_FUNCTION = "_expand_kernel_impl"


def _source_file():
    return vllm_file("utils", "cpu_triton_utils.py")


def form(path):
    """The function's form in the source: found, and whether it has the defect."""
    text = open(path, "rb").read()
    out = {"file": path, "sha256": hashlib.sha256(text).hexdigest(), "function": False,
           "defect_form": False}
    tree = ast.parse(text.decode("utf-8", "replace"))
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name == TARGET_FUNCTION), None)
    if fn is None:
        return out
    out["function"] = True
    out["line"] = fn.lineno
    first = fn.args.args[0].arg if fn.args.args else "output"
    converted = copied_back = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            # _ensure_int64(output) as an argument of the kernel call
            if ast_name(node.func) == "_ensure_int64" and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == first:
                converted = True
            # output.copy_(...) or output[...] = ... puts values back
            if isinstance(node.func, ast.Attribute) and node.func.attr == "copy_" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == first:
                copied_back = True
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else None
                if isinstance(base, ast.Name) and base.id == first:
                    copied_back = True
    out["converts_output"] = converted
    out["copies_back"] = copied_back
    out["defect_form"] = converted and not copied_back
    return out


def behaves():
    """Call the function in force on a float32 output: is it left unwritten?"""
    try:
        import torch
        from vllm.platforms.cpu import CpuPlatform

        CpuPlatform.import_kernels()
        from vllm.utils import cpu_triton_utils as mod

        out = torch.full((6,), -1.0)
        getattr(mod, TARGET_FUNCTION)(out, torch.tensor([0.5, 2.0]), torch.tensor([2, 6]), 0, 1)
        want = [0.5, 0.5, 2.0, 2.0, 2.0, 2.0]
        got = [round(float(x), 4) for x in out]
        return {"ran": True, "defect": got != want, "output": got, "expected": want}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"ran": False, "error": f"{type(exc).__name__}: {exc}"}


def main():
    report(TARGET_MODULE, TARGET_FUNCTION, _source_file(), form, behaves)


if __name__ == "__main__":
    main()
