"""The taps hook of ``diagnose`` without a server: the per-head comparison on tap records from
real vLLM (fixtures/draft_attention, recorded as its README says), the launch it builds, why no
tap fired, the draft's parallel config from the launch, and a launch that never starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specdoctor.diagnose import catalogue
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.taps import experiment as hook
from specdoctor.experiments.taps import heads
from specdoctor.launch import LaunchSpec

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).with_name("fixtures") / "draft_attention"


def _records(kind: str):
    from specdoctor.experiments.taps.records import load_dir

    return load_dir(FIXTURES / kind)


def _summary(records):
    from specdoctor.experiments.taps.attention import reference

    rows = []
    for r in records:
        out, ref = reference(r)
        rows.append(heads.record_heads(r.label, r.layer, out, ref, r.tensors["cu_seqlens_q"].tolist(),
                                       r.tensors["seqused_k"].tolist()))
    return heads.summarize(rows)


# -- the comparison math ---------------------------------------------------------------------

def test_tolerance_is_a_multiple_of_the_dtypes_epsilon_capped_for_half_precisions():
    assert heads.tolerance("torch.float32") == pytest.approx(1024 * 2.0 ** -23)
    assert heads.tolerance("float16") == heads.MAX_TOLERANCE  # 1024 * 2^-10 = 1.0, capped
    assert heads.tolerance("bfloat16") == heads.MAX_TOLERANCE
    assert heads.tolerance("float64") < 1e-12


def test_head_errors_zero_head_nan_and_an_empty_reference():
    ref = np.ones((2, 3, 4))
    out = ref.copy()
    out[0, 1] = 0.0              # a dropped head: relative error 1, and all zeros
    out[1, 2, 0] = np.nan        # a non-finite output: never within tolerance
    ref[1, 0] = 0.0
    out[1, 0] = 0.0              # nothing to attend and nothing written: no error
    rel, zero = heads.head_errors(out, ref)
    assert rel[0, 1] == 1.0 and zero[0, 1]
    assert np.isinf(rel[1, 2]) and not zero[1, 2]
    assert rel[1, 0] == 0.0 and not zero[1, 0]
    assert rel[0, 0] == 0.0 and rel[1, 1] == 0.0


def test_row_positions_place_decode_and_prefill_rows_in_their_sequence():
    # sequence 0: 3 new tokens ending a context of 10 (positions 7, 8, 9); sequence 1: one
    # decode token at position 4 of 5
    pos = heads.row_positions([0, 3, 4], [10, 5])
    assert pos.tolist() == pytest.approx([0.7, 0.8, 0.9, 0.8])


def test_healthy_real_taps_match_fp64_within_float32_rounding():
    s = _summary(_records("healthy"))
    assert s.records == 2 and s.rows == 32 and s.heads == 4
    assert s.off == 0
    # what the tolerance is set against: a correct fp32 kernel leaves a few epsilons
    assert max(s.max_err_per_head) < 8 * 2.0 ** -23, s.max_err_per_head
    verdict, text = heads.decide(s)
    assert verdict == "excluded" and "every head of every row matches" in text


def test_faulty_real_taps_show_three_of_four_heads_lost_past_the_first_quarter():
    s = _summary(_records("faulty"))
    verdict, text = heads.decide(s)
    assert verdict == "confirmed", text
    assert s.off_heads == (1, 2, 3)            # head 0 of every 4 is kept
    assert s.max_err_per_head[0] < 1e-6 and min(s.max_err_per_head[1:]) == 1.0
    assert s.zero == s.off                      # every lost cell is all zeros
    # lost rows lie past the first quarter of their context, the matching ones inside it
    assert s.off_pos is not None and s.off_pos[0] >= 0.25
    assert s.ok_pos is not None and s.ok_pos[1] < 0.25
    assert "3 of 4 heads (1, 2, 3)" in text and f"on {s.off_rows} of {s.rows} rows" in text


def test_a_handful_of_cells_off_is_inconclusive_not_confirmed():
    recs = _records("healthy")
    rec = recs[0]
    out = rec.tensors["out"].clone()
    out[5, 2] *= 1.01                            # one cell 1% off: beyond rounding, not a pattern
    rec.tensors["out"] = out
    s = _summary(recs)
    verdict, text = heads.decide(s)
    assert s.off == 1 and s.off_heads == (2,)
    assert verdict == "inconclusive" and "too few" in text


def test_findings_from_real_taps_and_a_record_that_cannot_be_compared():
    f, nums, skipped = hook.findings_from_taps(_records("faulty"))
    assert f.hypothesis == hook.HID and f.verdict is Verdict.CONFIRMED
    assert nums["heads_off"] == [1, 2, 3] and not skipped
    broken = _records("healthy")
    del broken[0].tensors["q"]
    f, nums, skipped = hook.findings_from_taps(broken)
    assert f.verdict is Verdict.EXCLUDED and len(skipped) == 1 and "not comparable" in f.evidence
    del broken[1].tensors["out"]
    f, _, _ = hook.findings_from_taps(broken)
    assert f.verdict is Verdict.INCONCLUSIVE and "none comparable" in f.evidence


DRAFTERS = Path(__file__).with_name("fixtures") / "drafters"


def _drafter(kind: str):
    from specdoctor.experiments.taps.records import load_dir

    return load_dir(DRAFTERS / kind)


def test_eagle3_taps_with_heads_lost_confirm_it_with_the_pattern():
    f, nums, skipped = hook.findings_from_taps(_drafter("eagle3-heads-lost"))
    assert f.verdict is Verdict.CONFIRMED and not skipped, f.evidence
    assert nums["heads_off"] == [1, 2, 3] and nums["cells_zero"] == nums["cells_off"]
    # a causal prefill: rows past the first quarter lose heads, the rows inside it keep them
    assert nums["off_rows_position"][0] >= 0.25 and nums["matching_rows_position"][1] < 0.25


def test_dflash_taps_are_recomputed_non_causal_and_within_the_window():
    """A healthy DFlash block is non-causal: judged with its own mask it matches fp64 to float32
    rounding; judged causal it would be off. The windowed drafter matches only with its window
    of 4 on both sides."""
    from specdoctor.experiments.taps.attention import recompute

    for kind, window in (("dflash", None), ("dflash-window", 4)):
        (rec,) = _drafter(kind)
        assert rec.meta["causal"] is False and rec.meta["layer_causal"] is False
        assert rec.meta["window"] == window
        f, nums, _ = hook.findings_from_taps([rec])
        assert f.verdict is Verdict.EXCLUDED, f.evidence
        assert max(nums["max_rel_err_per_head"]) < 8 * 2.0 ** -23
        rec.meta.update(causal=True, layer_causal=True)
        assert not recompute(rec).trusted, kind  # a causal reference would call it wrong
        rec.meta.update(causal=False, layer_causal=False)
        if window is not None:
            for other in (None, window + 1, window - 1):
                rec.meta["window"] = other
                assert not recompute(rec).trusted, other


def test_dflash_taps_with_heads_lost_confirm_it():
    f, nums, _ = hook.findings_from_taps(_drafter("dflash-heads-lost"))
    assert f.verdict is Verdict.CONFIRMED, f.evidence
    assert nums["heads_off"] == [1, 2, 3] and nums["cells_off"] == 3 * 4  # 4 rows x 3 heads


# -- the launch, and why nothing was tapped --------------------------------------------------

def test_tapped_launch_keeps_the_users_pythonpath_first(tmp_path):
    launch = LaunchSpec(("vllm", "serve", "m"), {"PYTHONPATH": "/user/patch:/user/lib", "A": "1"})
    out = hook.tapped_launch(launch, tmp_path / "pack", tmp_path / "taps", extra_path="/src")
    assert out.env["PYTHONPATH"].split(os.pathsep) == ["/user/patch", "/user/lib",
                                                       str(tmp_path / "pack"), "/src"]
    assert out.env["SPECDOCTOR_TAPS"] == str(tmp_path / "taps") and out.env["A"] == "1"
    assert "SPECDOCTOR_TAPS_PREFIX" not in out.env  # the draft's layers come from the proposer
    assert out.argv == launch.argv
    # no PYTHONPATH in the launch: the one the server inherits is kept, in front
    bare = hook.tapped_launch(LaunchSpec(("x",)), tmp_path / "p", tmp_path / "t",
                              base_pythonpath="/inherited")
    assert bare.env["PYTHONPATH"].split(os.pathsep) == ["/inherited", str(tmp_path / "p")]


def test_no_taps_reasons(tmp_path):
    assert "reported: cannot wrap" in hook.no_taps_reason([{"error": "cannot wrap X"}], "", "draft_model")
    live = hook.no_taps_reason([{"live": "model.layers.0.self_attn.attn"}], "", "eagle3")
    assert "model.layers.0.self_attn.attn" in live and "eagle3" in live
    assert "never reported" in live and "load_model" in live
    named = hook.no_taps_reason([{"draft_layers": ["model.layers.2.self_attn.attn"],
                                  "proposer": "EagleProposer"},
                                 {"live": "model.layers.0.self_attn.attn", "draft_layers": []}],
                                "", "eagle3")
    assert "model.layers.2.self_attn.attn" in named and "none of them ran" in named
    none = hook.no_taps_reason([{"draft_layers": [], "proposer": "EagleProposer"}], "", "eagle3")
    assert "named no attention layer" in none
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "sitecustomize.py").write_text("print('mine')\n")
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "sitecustomize.py").write_text("")
    (packed / "pack.json").write_text("{}")
    text = hook.no_taps_reason([], f"{packed}{os.pathsep}{plain}", "draft_model")
    assert str(plain / "sitecustomize.py") in text and "never loaded" in text
    assert "CPUAttentionBackendImpl.forward" in hook.no_taps_reason([], str(packed), "draft_model")


def test_parallel_config_excluded_only_on_an_unsharded_launch():
    f = hook.parallel_finding(LaunchSpec(("vllm", "serve", "m")))
    assert f.hypothesis == hook.PARALLEL and f.verdict is Verdict.EXCLUDED
    for argv in (("vllm", "serve", "m", "-tp", "2"),
                 ("vllm", "serve", "m", "--decode-context-parallel-size=4")):
        g = hook.parallel_finding(LaunchSpec(argv))
        assert g.verdict is Verdict.INCONCLUSIVE and "shards the target" in g.evidence, argv
    assert hook.parallel_finding(LaunchSpec(("x", "--tensor-parallel-size", "1"))).verdict is Verdict.EXCLUDED


def test_the_hook_is_wired_and_says_what_it_cannot_reach(tmp_path):
    exp = catalogue.experiment(catalogue.load().experiments["taps"])
    assert isinstance(exp, hook.Experiment)
    ctx = Context(workdir=tmp_path, launch=LaunchSpec(("x",)), launcher=object(), prompts=("a",),
                  method="draft_model")
    assert exp.unavailable(ctx) is None
    for method in ("eagle3", "dflash", "mtp", "eagle"):  # the proposer names their layers
        ctx.method = method
        assert exp.unavailable(ctx) is None, method
    ctx.method = "medusa"
    assert "no draft attention" in exp.unavailable(ctx)
    ctx.method = "ngram"
    assert "no draft attention" in exp.unavailable(ctx)
    ctx.method, ctx.launch = "draft_model", None
    assert "launch command" in exp.unavailable(ctx)


def test_the_built_pack_is_gated_by_the_taps_directory_alone(tmp_path):
    pack = hook.Experiment._build_pack(tmp_path / "p")
    assert json.loads((pack / "pack.json").read_text())["gate"] == "SPECDOCTOR_TAPS"
    # installed = its finder waits on sys.meta_path for vLLM's CPU attention module
    probe = "import sys; print(any(type(f).__name__ == '_Finder' for f in sys.meta_path))"
    env = {**os.environ, "PYTHONPATH": str(pack), "SPECDOCTOR_PROBES": "1"}
    env.pop("SPECDOCTOR_TAPS", None)
    off = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         check=False)
    on = subprocess.run([sys.executable, "-c", probe], env={**env, "SPECDOCTOR_TAPS": str(tmp_path)},
                        capture_output=True, text=True, check=False)
    assert off.stdout.strip() == "False", off.stderr[-2000:]
    assert on.stdout.strip() == "True", on.stderr[-2000:]


class _NeverStarts:
    def __init__(self) -> None:
        self.started: list[LaunchSpec] = []

    def start(self, launch: LaunchSpec, log_path: Path):
        self.started.append(launch)
        log_path.write_text("engine boom: unknown flag\n")
        raise SpecdoctorError("the server exited with code 2 before it answered", "read its log")

    def stop(self, server) -> None:
        raise AssertionError("stop without a server")


def test_a_launch_that_never_starts_is_inconclusive_and_does_not_raise(tmp_path):
    launcher = _NeverStarts()
    ctx = Context(workdir=tmp_path, launch=LaunchSpec(("vllm", "serve", "m"), {"PYTHONPATH": "/u"}),
                  launcher=launcher, prompts=("a", "b", "c"), method="draft_model")
    res = hook.Experiment().run(ctx, (hook.HID, hook.PARALLEL))
    by = {f.hypothesis: f for f in res.findings}
    assert by[hook.HID].verdict is Verdict.INCONCLUSIVE
    assert "did not start" in by[hook.HID].evidence and "no tap fired" in by[hook.HID].evidence
    assert by[hook.PARALLEL].verdict is Verdict.EXCLUDED
    (started,) = launcher.started
    assert started.env["PYTHONPATH"].split(os.pathsep)[0] == "/u"
    assert res.error and res.commands and res.numbers["records"] == 0


def test_only_the_parallel_question_needs_no_relaunch(tmp_path):
    launcher = _NeverStarts()
    ctx = Context(workdir=tmp_path, launch=LaunchSpec(("vllm", "serve", "m")), launcher=launcher,
                  prompts=("a",), method="draft_model")
    res = hook.Experiment().run(ctx, (hook.PARALLEL,))
    assert [f.verdict for f in res.findings] == [Verdict.EXCLUDED] and not launcher.started


def test_an_engine_side_gap_plans_taps_at_its_measured_cost():
    """What the clinic's heads-lost case needs: with the oracle gap open (steep decay, measured
    far below the oracle), the ledger asks taps about draft-attention-partial, at the cost
    measured for it (one restart plus about 20 s: benchmarks/results/taps_diagnose.txt)."""
    from specdoctor.diagnose import catalogue
    from specdoctor.diagnose.ledger import build
    from specdoctor.diagnose.signature import Signature

    cat = catalogue.load()
    for cls in ("steep-decay", "uniform-low", "cliff", "zero"):
        ledger = build(Signature(cls, "", cls), cat, restart_min=2.0)
        steps = {s.experiment: s for s in ledger.plan(cat, 2.0)}
        assert hook.HID in steps["taps"].hypotheses, cls
    cost = cat.experiments["taps"].cost
    assert cost.restarts == 1 and cost.cpu_min <= 1.0 and cost.gpu_min == 0
