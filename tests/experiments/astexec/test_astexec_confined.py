"""The code astexec runs comes from untrusted images: it cannot write outside its private
working folder, and it cannot signal specdoctor (its parent) or specdoctor's process group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

HOSTILE = '''
import os
import signal


def write(target):
    with open(target, "w") as fh:
        fh.write("written from the sandbox")
    return "wrote"


def write_home():
    with open(os.path.join(os.environ["HOME"], "mine.txt"), "w") as fh:
        fh.write("inside")
    with open("relative.txt", "w") as fh:
        fh.write("inside")
    return "wrote"


def link_out(target):
    os.symlink(target, "link.txt")
    with open("link.txt", "w") as fh:
        fh.write("through a link")
    return "wrote"


def kill_parent():
    os.kill(os.getppid(), signal.SIGTERM)
    return "sent"


def kill_group():
    os.killpg(os.getpgid(os.getppid()), signal.SIGTERM)
    return "sent"
'''


def test_sandboxed_code_cannot_write_outside_or_signal_specdoctor(tmp_path):
    mod = tmp_path / "hostile.py"
    mod.write_text(HOSTILE)
    outside, linked = tmp_path / "outside.txt", tmp_path / "linked.txt"
    calls = [f"write({str(outside)!r})", "write_home()", f"link_out({str(linked)!r})",
             "kill_parent()", "kill_group()"]
    args = [sys.executable, "-m", "specdoctor", "astexec", str(mod), "write", "write_home",
            "link_out", "kill_parent", "kill_group", "--json"]
    for c in calls:
        args += ["--call", c]
    # its own session, so that a signal to specdoctor's group could not reach this test
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120,
                          start_new_session=True)
    assert proc.returncode not in (-signal.SIGTERM, 128 + signal.SIGTERM), "specdoctor was killed"
    assert proc.returncode == 1, (proc.returncode, proc.stderr)  # calls raised: reported, exit 1
    out = json.loads(proc.stdout)
    by_expr = {c["expr"]: c for c in out["calls"]}
    assert by_expr["write_home()"].get("value") == "wrote", by_expr["write_home()"]
    for expr in (calls[0], calls[2], "kill_parent()", "kill_group()"):
        assert by_expr[expr].get("error", {}).get("type") == "PermissionError", by_expr[expr]
    assert not outside.exists() and not linked.exists()
    assert out["isolation"]["files"] and out["isolation"]["signals"]
    if os.geteuid() == 0:
        assert out["isolation"]["user"] == "nobody"


def test_a_module_the_stubs_and_calls_import_by_name_is_there_for_the_unprivileged_user(tmp_path):
    # as docs/your-server.md calls it: a stub that imports hashlib, a call that imports json;
    # where the interpreter's own files are not readable by the dropped user (a Python under
    # /root), only what was imported before the drop can be imported
    mod = tmp_path / "hashing.py"
    mod.write_text("def digest(data):\n    return safe_hash(data).hexdigest()\n")
    proc = subprocess.run(
        [sys.executable, "-m", "specdoctor", "astexec", str(mod), "digest", "--json",
         "--stub", "safe_hash=lambda data: __import__('hashlib').sha256(data)",
         "--call", "digest(b'spec')",
         "--call", "__import__('importlib').import_module('json').dumps([1])"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    values = [c.get("value") for c in json.loads(proc.stdout)["calls"]]
    import hashlib

    assert values == [hashlib.sha256(b"spec").hexdigest(), "[1]"]
