"""The oracle's engine trace is one probe pack: the committed ``packs/draft_trace`` directory
is the build of its spec, and ``engine_trace.read`` reads what the pack writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from specdoctor.oracle import engine_trace
from specdoctor.packs import build, spec

HOOK = engine_trace.HOOK_DIR
RUNTIME_REF = "../runtime.py"


def test_committed_hook_is_the_build_of_its_spec(tmp_path):
    fresh = build.build(spec.load(HOOK / "draft_trace.toml"), tmp_path / "pack",
                        runtime=RUNTIME_REF)
    for name in ("sitecustomize.py", "pack.json", "draft_trace.py"):
        assert (HOOK / name).read_text() == (fresh.dir / name).read_text(), (
            f"{name} is stale: rebuild with specdoctor probe build "
            f"{HOOK / 'draft_trace.toml'} -o {HOOK} --runtime {RUNTIME_REF}")
    assert (HOOK / RUNTIME_REF).resolve() == build.RUNTIME_SRC


# a stand-in scheduler module with vLLM's names and call shape
SCHED = '''
class _Req:
    def __init__(self, ids):
        self.prompt_token_ids = ids

class Scheduler:
    def __init__(self):
        self.requests = {"r1": _Req([5, 6, 7])}

    def update_from_output(self, scheduler_output, model_runner_output):
        self.requests.pop("r1", None)   # a finished request is freed by the update
        return "original-result"
'''

DRIVER = '''
import types
from vllm.v1.core.sched.scheduler import Scheduler
s = Scheduler()
so = types.SimpleNamespace(scheduled_spec_decode_tokens={"r1": [1, 2]},
                           num_scheduled_tokens={"r1": 3})
mo = types.SimpleNamespace(sampled_token_ids=[[1, 9]], req_id_to_index={"r1": 0})
assert s.update_from_output(so, mo) == "original-result"
so2 = types.SimpleNamespace(scheduled_spec_decode_tokens={}, num_scheduled_tokens={"r1": 1})
assert s.update_from_output(so2, types.SimpleNamespace(sampled_token_ids=[[]],
                                                       req_id_to_index={"r1": 0})) == "original-result"
print("OK")
'''


def test_hook_records_through_the_probe_runtime(tmp_path):
    pkg = tmp_path / "fake" / "vllm" / "v1" / "core" / "sched"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "fake" / "vllm", pkg.parent.parent, pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "scheduler.py").write_text(SCHED)
    log = tmp_path / "drafts.jsonl"
    env = engine_trace.hook_env(log)
    env["PYTHONPATH"] = env["PYTHONPATH"].split(os.pathsep)[0] + os.pathsep + str(tmp_path / "fake")
    proc = subprocess.run([sys.executable, "-c", DRIVER], check=False, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr
    assert log.read_text().startswith("[probe] draft-trace ")
    reqs = engine_trace.read(log)
    assert [(r.req_id, r.prompt_ids, r.rows) for r in reqs] == [("r1", [5, 6, 7], [([1, 2], [1, 9])])]


def test_read_reports_a_failing_pack(tmp_path):
    log = tmp_path / "d.jsonl"
    log.write_text("[probe] draft-trace " + json.dumps({"error": "probe failed: boom"}) + "\n")
    try:
        engine_trace.read(log)
    except RuntimeError as exc:
        assert "boom" in str(exc)
    else:
        raise AssertionError("a failing pack must not read as an empty trace")
