"""`specdoctor kernels check` through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

WRONG = '''
from specdoctor.experiments.kernels.adapters import sdpa_paged

def flex_le(q, k_cache, v_cache, *, window, **kw):
    """A FlexAttention-convention kernel whose window test is <= instead of <."""
    return sdpa_paged(q, k_cache, v_cache, window=None if window is None else window + 1, **kw)

flex_le.mask_convention = "flex"
'''


def run(*args: str, path: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, "-m", "specdoctor", "kernels", "check", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_pass_json_then_user_adapter_fails_with_position(tmp_path):
    r = run("--suite", "smoke", "--impl", "sdpa,flash-attn", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and d["negative_control"]["caught"]
    skipped = {i["name"]: i["skipped_because"] for i in d["implementations"] if not i["ran"]}
    assert "CUDA" in skipped["flash-attn"] and "SKIPPED flash-attn" in r.stderr
    (tmp_path / "myattn.py").write_text(WRONG)
    r = run("--suite", "smoke", "--impl", "sdpa,myattn:flex_le", path=str(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "FAIL myattn:flex_le on smoke/noncausal-swa/edge" in r.stdout
    assert "q_pos" in r.stdout and "negative control caught" in r.stdout


def test_a_top_left_user_kernel_fails_with_the_cause_named():
    here = os.path.dirname(os.path.abspath(__file__))  # paged_kernels.py
    r = run("--suite", "smoke", "--impl", "paged_kernels:top_left,paged_kernels:bottom_right",
            "--json", path=here)
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    res = {(x["impl"], x["case"]): x for x in d["results"]}
    assert all(res[("paged_kernels:bottom_right", c["name"])]["ok"] for c in d["cases"])
    bad = res[("paged_kernels:top_left", "smoke/causal/edge")]
    assert not bad["ok"] and bad["cause"].startswith("top-left causal")
    assert res[("paged_kernels:top_left", "smoke/noncausal-swa/edge")]["ok"]
    r = run("--suite", "smoke", "--impl", "paged_kernels:top_left", path=here)
    out = " ".join(r.stdout.split())
    assert r.returncode == 1 and "cause paged_kernels:top_left: 2 of its 2 failing case(s) " \
        "match the reference of top-left causal" in out, r.stdout


@pytest.mark.parametrize("args,message", [
    (("--tol", "bf16=1"), "cannot read --tol"),
    (("--suite", "nope"), "no suite 'nope'"),
    (("--impl", "nomodule:fn"), "cannot import nomodule"),
    (("--impl", "sdpa,sdpa"), "names an implementation twice"),
])
def test_bad_arguments_are_one_line(args, message):
    r = run(*args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
