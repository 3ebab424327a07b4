"""target-precision-ab on the real lab (two boots): the self-drafting lab server served with its
target at bfloat16, relaunched at float32. The bf16 draft agrees with the bf16 target as the fp32
one does with the fp32 target, so the float32 relaunch recovers nothing: target-hidden-noise is
excluded, with both measurements in its evidence."""

from __future__ import annotations

import pytest

from specdoctor.experiments import precision as px
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict

pytestmark = pytest.mark.lab


def test_bf16_target_relaunched_at_float32_recovers_nothing(tmp_path):
    from specdoctor.bench.prompts import take
    from specdoctor.experiments import common
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import Servers, free_port

    launch = labmod.lab_spec("draft_model", 4, free_port()).with_arg("--dtype", "bfloat16")
    s = common.settings(launch)
    ctx = Context(workdir=tmp_path, launch=launch, launcher=Servers(timeout_s=1500), settings=s,
                  method=s.method, k=s.k, target_dir=s.target, draft_dir=s.draft,
                  prompts=tuple(take("code", 4)), max_tokens=32)
    exp = px.Experiment()
    assert exp.unavailable(ctx) is None
    try:
        res = exp.run(ctx, (px.HID,))
    finally:
        ctx.launcher.stop_all()
    f = res.findings[0]
    assert res.error is None, res.to_json()
    assert res.numbers["served_dtype"] == "bfloat16"
    assert res.numbers["read_from"] == "the launch's --dtype"
    assert f.verdict is Verdict.EXCLUDED, f.evidence
    assert "bfloat16 → float32 unquantized" in f.evidence and "no recovery" in f.evidence
    assert res.numbers["before"] > 3.0 and res.numbers["after"] > 3.0   # a self-draft, k=4
    assert set(res.curves) == {"as served", "after target at float32"}
    # the engine itself says which precision each server ran at
    (served,) = tmp_path.glob("server-precision-as-served-*.log")
    (high,) = tmp_path.glob("server-precision-float32-*.log")
    assert "dtype=torch.bfloat16" in served.read_text(errors="replace")
    assert "dtype=torch.float32" in high.read_text(errors="replace")
