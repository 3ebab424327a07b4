"""Case B in miniature, for real (gloo, 4 CPU ranks): the check after the reduction passes,
`taps check` on the taps before it names the fault."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from specdoctor.experiments.taps.case_b import run  # noqa: E402
from specdoctor.experiments.taps.check import check_dir  # noqa: E402
from specdoctor.experiments.taps.records import by_step, load_dir  # noqa: E402


@pytest.fixture(scope="module")
def tapdir(tmp_path_factory):
    return run(tmp_path_factory.mktemp("caseb"))


def test_reduction_hides_the_fault(tapdir):
    groups = by_step(load_dir(tapdir))
    draft = groups[("hidden", "draft.0", 0)]
    target = groups[("hidden", "target.0", 0)]
    # after the all-reduce every rank holds the same draft hidden state, bit for bit ...
    assert all(torch.equal(draft[0].tensors["hidden"], draft[r].tensors["hidden"]) for r in range(4))
    # ... and it is wrong: the same weights over the same context give the target another one
    diff = (draft[0].tensors["hidden"] - target[0].tensors["hidden"]).abs().max()
    assert diff > 0.1
    findings = check_dir(tapdir)
    post = [f for f in findings if f.check == "post-reduction"]
    assert {f.level for f in post} == {"note"} and len(post) == 2


def test_taps_check_names_the_fault_before_the_reduction(tapdir):
    findings = check_dir(tapdir)
    draft = [f for f in findings if "draft" in f.where]
    target = [f for f in findings if "target" in f.where]
    assert not [f for f in target if f.level == "fault"], [f.message for f in target if f.level == "fault"]
    faults = {f.check for f in draft if f.level == "fault"}
    assert faults == {"merge-skipped", "world-size", "local-seq-lens", "recompute-global"}
    (lens,) = [f for f in draft if f.check == "local-seq-lens"]
    assert "6/6/5/5, together 22" in lens.message
    assert sum(f.check == "merge-skipped" for f in draft) == 4
    # the kernel itself is right on what it was given: the tap is trusted, the inputs are not
    local = [f for f in draft if f.check == "recompute"]
    assert len(local) == 4 and all(f.level == "ok" and f.data["cosine"] > 0.9999 for f in local)
    assert all(f.data["cosine"] < 0.9 for f in draft if f.check == "recompute-global")
    assert all(f.data["cosine"] > 0.9999 for f in target if f.check == "recompute-global")


def test_cli_exit_code_and_json(tapdir):
    r = subprocess.run([sys.executable, "-m", "specdoctor", "taps", "check", str(tapdir), "--json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 1, r.stderr
    import json

    d = json.loads(r.stdout)
    assert not d["ok"] and any(f["check"] == "merge-skipped" for f in d["findings"])
