"""What the verdict patches' applicability checks share (``*_check.py`` beside this file).

Each check runs as a script with the engine's own Python and the launch's environment, so it
imports only the standard library, torch and vLLM; this module sits beside them and is found
as the script's own directory. ``report`` prints the one line ``packs.verdicts`` reads.
"""

import ast
import importlib.util
import json
import os
import sys

CHECK_PREFIX = "SPECDOCTOR-CHECK "


def vllm_file(*parts):
    """The installed vLLM's source file at ``parts`` (None: no vLLM, or no such file)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(next(iter(spec.submodule_search_locations)), *parts)
    return path if os.path.isfile(path) else None


def ast_name(node):
    """The name a call or reference ends in (``x`` of ``a.b.x`` or of ``x``)."""
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)


def platform():
    """vLLM's platform as this environment resolves it."""
    try:
        from vllm.platforms import current_platform

        return {"cpu": bool(current_platform.is_cpu()),
                "name": type(current_platform).__name__}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"cpu": None, "error": f"{type(exc).__name__}: {exc}"}


def report(module, target, path, form, behaves):
    """The check's facts as one line: the code's ``form(path)``, vLLM's version, the platform,
    and, where the function exists and the path is the CPU's, ``behaves()``."""
    result = {"python": sys.executable, "module": module, "target": target}
    if path is None:
        result["form"] = {"file": None, "function": False, "defect_form": False}
    else:
        result["form"] = form(path)
        try:
            import vllm

            result["vllm"] = getattr(vllm, "__version__", None)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            result["vllm_error"] = f"{type(exc).__name__}: {exc}"
        result["platform"] = platform()
        if result["form"]["function"] and result["platform"].get("cpu"):
            result["behaves"] = behaves()
    sys.stdout.write(CHECK_PREFIX + json.dumps(result) + "\n")
