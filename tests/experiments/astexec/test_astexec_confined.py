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
