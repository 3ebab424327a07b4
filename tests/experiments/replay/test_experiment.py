"""The replay experiment without a server: what it relaunches (the draft trace after the
launch's own PYTHONPATH), which measurements it takes again (those off their oracle), and
that it relaunches nothing when every measurement meets its oracle."""

from __future__ import annotations

import os
from pathlib import Path

from specdoctor.experiments.base import Context, Measured

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.replay.experiment import Experiment, off_labels, traced_launch
from specdoctor.verdict.rules import Gap
from specdoctor.launch import parse_command
from specdoctor.oracle import engine_trace

EQUAL = Gap(4.0, 4.0, 0.0, 0.0)
ABOVE = Gap(0.876, 0.002, -0.95, -0.80)


def test_the_trace_goes_after_the_launchs_own_pythonpath(tmp_path):
    launch = parse_command("vllm serve m", {"PYTHONPATH": "/patches"})
    traced = traced_launch(launch, tmp_path / "t.jsonl")
    assert traced.env["PYTHONPATH"].split(os.pathsep) == ["/patches",
                                                          str(engine_trace.HOOK_DIR)]
    assert traced.env[engine_trace.LOG_ENV] == str(tmp_path / "t.jsonl")
    assert launch.env == {"PYTHONPATH": "/patches"}   # the spec is not changed in place


def test_only_the_measurements_off_their_oracle_are_taken_again(tmp_path):
    ctx = Context(tmp_path, measured=Measured(greedy=object(), sampled=object()),
                  sampling=(1.0, 0.95), oracle_gap=EQUAL, oracle_sampled_gap=ABOVE)
    assert off_labels(ctx) == {"sampled": (1.0, 0.95)}
    ctx.oracle_gap = Gap(3.6, 4.0, 0.21, 0.58)
    assert set(off_labels(ctx)) == {"greedy", "sampled"}
    ctx.oracle_gap, ctx.oracle_sampled_gap = EQUAL, Gap(0.45, 0.43, -0.015, 0.01)
    assert off_labels(ctx) == {}
    # equal, but not shown within 5% of the oracle (a verifier defect inside the interval is
    # not ruled out): taken again
    ctx.oracle_sampled_gap = Gap(0.256, 0.269, -0.042, 0.060)
    assert off_labels(ctx) == {"sampled": (1.0, 0.95)}


def test_nothing_off_its_oracle_excludes_both_without_a_relaunch(tmp_path):
    ctx = Context(tmp_path, measured=Measured(greedy=object()), oracle_gap=EQUAL)
    r = Experiment().run(ctx, ("rejection-sampler", "engine-drafting"))
    assert {f.hypothesis: f.verdict for f in r.findings} == {
        "rejection-sampler": Verdict.EXCLUDED, "engine-drafting": Verdict.EXCLUDED}
    assert r.commands == [] and all(f.basis == "comparison" for f in r.findings)


def test_it_says_why_it_cannot_run(tmp_path: Path):
    e = Experiment()
    assert "launch command" in (e.unavailable(Context(tmp_path)) or "")
    sglang = parse_command("python -m sglang.launch_server --model-path m", {})
    ctx = Context(tmp_path, launch=sglang, launcher=object())  # type: ignore[arg-type]
    assert "vLLM's scheduler" in (e.unavailable(ctx) or "")
