"""The kernel-equivalence experiment: a suite built from the served setup (the drafter's and the
target's shapes and masks, k + 1 queries, the window's edge), which kernel runs for which
backend, and the verdicts of real kernel runs (torch SDPA as the served kernel, a kernel that
reads one key too many, and vLLM's CPU op on the lab's DFlash drafter where it is installed)."""

from __future__ import annotations

import importlib.util
import json
from functools import partial
from pathlib import Path

import pytest

from specdoctor.experiments.base import Context

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.kernels import experiment as kx
from specdoctor.experiments.kernels.adapters import MODEL_MASK, Adapter, sdpa_paged
from specdoctor.experiments.masks.served import Served, ServedLayer
from specdoctor.launch import LaunchSpec

pytest.importorskip("torch")
PROBES = Path(__file__).parents[1] / "probes" / "fixtures"


def _served(backend: str | None = "cpu", window: int | None = 8) -> Served:
    draft = [ServedLayer(f"d{i}", window, False, 4, 2, 16, backend) for i in range(2)]
    target = [ServedLayer("t0", None, True, 4, 2, 16, backend)]
    return Served("dflash", draft, target, "the live engine (startup probes)",
                  "the live engine (startup probes)", "float32", 16)


def test_the_suite_takes_the_served_shapes_masks_and_k():
    cases = kx.suite(_served(), k=3, max_len=1024)
    shapes = {(c.heads_q, c.heads_kv, c.head_dim, c.window, c.causal) for c in cases}
    assert shapes == {(4, 2, 16, 8, False), (4, 2, 16, None, True)}
    assert {c.dtype for c in cases} == {"float32"} and {c.block_size for c in cases} == {16}
    edge = [c for c in cases if "window-edge" in c.name]
    assert edge and all(q == 4 for c in edge for _, q in c.seqs)       # k + 1 queries
    assert {ctx for c in edge for ctx, _ in c.seqs} == {7, 8, 9}
    assert {c.data for c in cases} == {"random", "edge"}
    assert all(ctx + q <= 64 for c in kx.suite(_served(), 3, 64) for ctx, q in c.seqs)
    # non-causal layers alone cannot fail the shifted control: a causal case is added
    lone = Served("dflash", [ServedLayer("d", None, False, 4, 2, 16, "cpu")], [], "x", "x")
    assert any(c.causal for c in kx.suite(lone, 3, 1024))


def test_the_kernel_of_the_served_backend_runs():
    assert kx.impls(_served("cpu"), "cpu")[0] == ["vllm-cpu"]
    assert kx.impls(_served("fa2"), "cuda")[0] == ["flash-attn"]
    assert kx.impls(_served(None), "cuda")[0] == ["flash-attn", "flex"]
    assert kx.impls(_served(None), "cpu")[0] == ["vllm-cpu"]
    assert kx.impls(_served("triton"), "cuda")[0] == []


def _run(fn, name: str):
    from specdoctor.experiments.kernels.run import check

    cases = kx.suite(_served(), k=3, max_len=256)
    adapter = Adapter(name, "sdpa", "test", fn, convention=MODEL_MASK)
    return kx.decide(check(cases, [adapter], "cpu"), "the served backend", "test shapes")


def test_a_kernel_within_tolerance_is_excluded_and_one_key_off_is_confirmed():
    f = _run(sdpa_paged, "sdpa")
    assert f.verdict is Verdict.EXCLUDED and "negative control was caught" in f.evidence
    f = _run(partial(sdpa_paged, shift=1), "one-key-late")
    assert f.verdict is Verdict.CONFIRMED, f.evidence
    assert "one-key-late fails" in f.evidence and "query position" in f.evidence


def test_nothing_ran_is_inconclusive():
    from specdoctor.experiments.kernels.run import Report

    report = Report("cpu", "served", [], [Adapter("flash-attn", "fa2", "x",
                                                 unavailable="needs a CUDA GPU")])
    f = kx.decide(report, "the served backend (fa2)", "x")
    assert f.verdict is Verdict.INCONCLUSIVE and "needs a CUDA GPU" in f.evidence


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM's CPU op")
def test_vllm_cpu_on_the_lab_dflash_shapes(tmp_path):
    d, t = tmp_path / "drafter", tmp_path / "target"
    for path, name in ((d, "dflash_window_draft.json"), (t, "dflash_target.json")):
        path.mkdir()
        (path / "config.json").write_text((PROBES / name).read_text())
    ctx = Context(workdir=tmp_path, method="dflash", k=3, draft_dir=d, target_dir=t,
                  launch=LaunchSpec(("vllm",)))
    exp = kx.Experiment()
    assert exp.unavailable(ctx) is None
    res = exp.run(ctx, ("kernel-numerics",))
    f = res.findings[0]
    assert f.verdict is Verdict.EXCLUDED, f.evidence
    assert res.numbers["impls"] == ["vllm-cpu"] and res.numbers["control_caught"]
    assert "draft H 4/2 D 32 non-causal window 4" in f.evidence
    assert json.dumps(res.to_json())
