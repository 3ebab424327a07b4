"""Hidden-state drafters in the oracle, without a server: refusals named before anything large
is loaded, and the two engines (greedy by one recorded decode; step by step) agreeing on every
step of the lab's trained drafters."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specdoctor.errors import InputError  # noqa: E402
from specdoctor.oracle.heads import dflash, eagle3, mtp  # noqa: E402

TARGET = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "vocab_size": 100,
          "num_hidden_layers": 4}


def _eagle3_cfg(**kw):
    return {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "vocab_size": 100,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "draft_vocab_size": 50, "eagle_aux_hidden_state_layer_ids": [0, 2, 4], **kw}


def _eagle3_tensors(h=64, n_aux=3, dv=50):
    z = torch.zeros
    t = {f"midlayer.self_attn.{n}_proj.weight": z(64 if n in "qo" else 32, 2 * h)
         for n in "qkv"}
    t["midlayer.self_attn.o_proj.weight"] = z(h, 64)
    t.update({f"midlayer.mlp.{n}_proj.weight": z(128, h) for n in ("gate", "up")})
    t["midlayer.mlp.down_proj.weight"] = z(h, 128)
    t.update({f"midlayer.{n}.weight": torch.ones(h)
              for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm")})
    t.update({"norm.weight": torch.ones(h), "fc.weight": z(h, n_aux * h),
              "lm_head.weight": z(dv, h), "d2t": torch.arange(dv)})
    return t


def _shared(name):
    return torch.zeros(100, 64)


def test_a_well_formed_head_is_read():
    head = eagle3.build(_eagle3_cfg(), _eagle3_tensors(), TARGET, _shared)
    assert head.aux_ids == (0, 2, 4) and head.d2t is not None and len(head.layers) == 1


def test_a_smaller_draft_vocabulary_without_d2t_is_served_with_zero_offsets():
    """As vLLM 0.32 serves it (llama_eagle3.py starts the map at zeros and loads none): draft
    id i proposes target id i, with no error."""
    t = _eagle3_tensors()
    del t["d2t"]
    head = eagle3.build(_eagle3_cfg(), t, TARGET, _shared)
    assert head.d2t is not None and head.d2t.tolist() == [0] * 50
    assert head.draft_ids(torch.eye(50)[[3, 49]]).tolist() == [3, 49]


@pytest.mark.parametrize(("cfg", "tensors", "message"), [
    (_eagle3_cfg(architectures=["Eagle3Speculator"]), None,
     r"'Eagle3Speculator', not an EAGLE3 head.*vLLM 0\.32"),
    (_eagle3_cfg(parallel_drafting=True), None,
     r"parallel_drafting=True.*vLLM 0\.32"),
    (_eagle3_cfg(hidden_size=32), None, r"hidden size is 32, the target's hidden size is 64"),
    (_eagle3_cfg(vocab_size=101), None, r"vocab_size is 101, the target's is 100"),
    (_eagle3_cfg(eagle_aux_hidden_state_layer_ids=[0, 2, 5]), None,
     r"\[5\] is outside|\[5\], outside"),
    (_eagle3_cfg(num_hidden_layers=None), None, r"no 'num_hidden_layers'.*vLLM 0\.32"),
    (_eagle3_cfg(), {"fc.weight": torch.zeros(64, 128)}, r"fc\.weight has shape \(64, 128\)"),
    (_eagle3_cfg(), {"d2t": torch.full((50,), 60)}, r"d2t maps a draft id to target id 109"),
])
def test_what_the_oracle_cannot_read_is_refused_by_name(cfg, tensors, message):
    t = {**_eagle3_tensors(), **(tensors or {})}
    with pytest.raises(InputError, match=message):
        eagle3.build(cfg, t, TARGET, _shared)


def test_dflash_needs_its_mask_token_and_names_the_key():
    cfg = {"architectures": ["DFlashDraftModel"], "hidden_size": 64, "vocab_size": 100,
           "dflash_config": {"target_layer_ids": [0, 1]}}
    with pytest.raises(InputError, match=r"no 'mask_token_id'.*vLLM 0\.32.*qwen3_dflash"):
        dflash.build(cfg, {}, TARGET, _shared)
    cfg["dflash_config"] = {"target_layer_ids": [0, 4], "mask_token_id": 2}
    with pytest.raises(InputError, match=r"aux states \[1, 5\].*\[5\] is outside"):
        dflash.build(cfg, {}, TARGET, _shared)


def test_deepseek_mtp_is_recognised_and_refused_with_the_reason():
    with pytest.raises(InputError, match="MLA attention and mixture-of-experts"):
        mtp.build({"architectures": ["DeepseekV3ForCausalLM"]}, lambda p: {})
    with pytest.raises(InputError, match=r"'LlamaForCausalLM': no MTP layers"):
        mtp.build(TARGET, lambda p: {})


def test_models_too_large_are_refused_before_the_drafter_is_read(monkeypatch):
    from specdoctor.lab import drafters
    from specdoctor.oracle import heads, models
    from specdoctor.oracle.runner import OracleConfig, run_oracle

    target, draft = drafters.module("eagle3").control("pos0")
    monkeypatch.setattr(models, "available_bytes", lambda device: 1024)
    monkeypatch.setattr(heads, "load", lambda *a: pytest.fail("loaded before the size check"))
    with pytest.raises(InputError, match="do not fit on cpu"):
        run_oracle(OracleConfig(target, ("x",), method="eagle3", draft=draft, device="cpu"))


@pytest.mark.parametrize("method", ["eagle3", "mtp", "dflash"])
def test_greedy_by_one_decode_equals_the_step_by_step_engine(method):
    """Two implementations of the same engine on the lab's trained (ci) drafter: the batched
    walk over one recorded decode, and ``simulate``'s step loop with the drafter re-run on
    each step's context. Every step must agree: drafts, accepted, emitted."""
    import numpy as np

    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import targets
    from specdoctor.oracle import heads
    from specdoctor.oracle.heads.engine import HeadDrafter, greedy_traces
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import CachedLM, load_model, load_tokenizer
    from specdoctor.oracle.simulate import Sampling, run_request

    target, draft = drafters.module(method).trained_pair("ci")
    head = heads.load(method, target, draft)
    model = load_model(target, "cpu", "float32")
    tok = load_tokenizer(targets.tokenizer_dir())
    prompts = [tok(p)["input_ids"] for p in take("code", 4)]
    k, max_tokens = 3, 32
    fast = greedy_traces(StreamTarget(model, head.aux_ids), head, prompts, k, max_tokens, "cpu")
    stepper = HeadDrafter(StreamTarget(model, head.aux_ids), head, "cpu")
    steps = [x for f in fast for x in f.steps]
    assert any(x.accepted for x in steps) and any(x.accepted < k for x in steps)
    for ids, f in zip(prompts, fast):
        s = run_request(ids, CachedLM(model, "cpu"), stepper, k, max_tokens, Sampling(),
                        np.random.default_rng(0))
        assert s.output_ids == f.output_ids
        assert [(x.drafts, x.accepted, x.emitted) for x in s.steps] == \
            [(x.drafts, x.accepted, x.emitted) for x in f.steps]


@pytest.mark.parametrize("method", ["eagle3", "mtp", "dflash"])
def test_every_head_can_draft_with_its_positions_shifted(method):
    """The replay's position search for hidden-state drafters (``HeadDrafter.chain_shifted``)
    on the lab's trained (ci) drafters: no shift is the plain chain, and a shift of one either
    way reaches the drafter's positions (its draft margins move), each shift its own way."""
    from dataclasses import replace

    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import targets
    from specdoctor.oracle import heads
    from specdoctor.oracle.heads.engine import HeadDrafter
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import load_model, load_tokenizer

    target, draft = drafters.module(method).trained_pair("ci")
    head = heads.load(method, target, draft)
    model = load_model(target, "cpu", "float32")
    tok = load_tokenizer(targets.tokenizer_dir())
    st = StreamTarget(model, head.aux_ids)
    d = HeadDrafter(st, head, "cpu")
    k = 3
    ids = tok(take("code", 1)[0])["input_ids"][:24]
    assert d.chain_shifted(ids, k, 0) == d.argmax_chain(ids, k)[0]
    assert d.head is head   # the shift is undone
    x = torch.tensor([ids])
    streams, _ = st.features(x)
    with torch.inference_mode():
        _, plain = head.drafts(streams, x, k)
        moved = {off: replace(head, pos_offset=off).drafts(streams, x, k)[1] for off in (1, -1)}
    for off, m in moved.items():
        assert (m - plain).abs().max() > 1e-4, off
    assert (moved[1] - moved[-1]).abs().max() > 1e-4


def test_a_dflash_drafter_with_a_reduced_vocabulary_drafts_target_ids_through_its_d2t(
        tmp_path):
    """A DFlash drafter whose LM head covers part of the target's vocabulary, with ``d2t``
    (as vLLM serves it: logits scattered to target ids): every draft is a target id of that
    part, and wherever the full-vocabulary drafter's draft lies in it, the two agree. Read
    from a checkpoint, the map is taken from ``d2t`` and ``draft_vocab_size``."""
    from dataclasses import replace

    from specdoctor.bench.prompts import take
    from specdoctor.lab import drafters
    from specdoctor.lab.drafters import targets
    from specdoctor.oracle import heads
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import load_model, load_tokenizer

    target, draft = drafters.module("dflash").trained_pair("ci")
    head = heads.load("dflash", target, draft)
    assert head.d2t is None
    model = load_model(target, "cpu", "float32")
    tok = load_tokenizer(targets.tokenizer_dir())
    x = torch.tensor([tok(take("code", 1)[0])["input_ids"][:32]])
    streams, _ = StreamTarget(model, head.aux_ids).features(x)
    with torch.inference_mode():
        full, _ = head.drafts(streams, x, 3)
    seen = sorted(set(full[0, :-1].flatten().tolist()))
    keep = torch.tensor(sorted(set(seen[::2]) | set(range(600, 700))))   # half of what it drafts
    reduced = replace(head, lm_head=head.lm_head[keep], d2t=keep - torch.arange(len(keep)))
    with torch.inference_mode():
        part, _ = reduced.drafts(streams, x, 3)
    f, p = full[0, :-1].flatten(), part[0, :-1].flatten()
    inside = torch.isin(f, keep)
    assert torch.isin(p, keep).all()
    assert inside.any() and not inside.all()
    # a block's slots are drafted in one pass from mask tokens, not from earlier drafts
    assert torch.equal(p[inside], f[inside])
    # the same head written as a checkpoint is read with its map
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    d = tmp_path / "reduced"
    shutil.copytree(draft, d)
    tensors = load_file(str(d / "model.safetensors"))
    name = next(n for n in tensors if n.endswith("lm_head.weight")) if any(
        n.endswith("lm_head.weight") for n in tensors) else "lm_head.weight"
    tensors[name] = head.lm_head[keep].contiguous()
    tensors["d2t"] = (keep - torch.arange(len(keep))).to(torch.int64)
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((d / "config.json").read_text())
    cfg["draft_vocab_size"] = len(keep)
    (d / "config.json").write_text(json.dumps(cfg))
    read = heads.load("dflash", target, d)
    assert read.d2t is not None and torch.equal(read.d2t + torch.arange(len(keep)), keep)


def test_draft_logits_land_on_target_ids_as_vllm_scatters_them():
    """``ops.to_target_vocab``, as vLLM's EAGLE3/DFlash ``compute_logits``
    (``logits_new[:, arange + d2t] = logits``): an unmapped target id is -inf; where a map
    sends two draft ids to one target id, the later draft id's logit is the one that lands;
    the argmax is then taken over target ids, so the earlier draft id is never proposed."""
    from specdoctor.oracle.heads import ops

    logits = torch.tensor([[5.0, 1.0, 3.0, 4.0]])
    d2t = torch.tensor([0, 1, 0, 0])                 # draft ids -> target 0, 2, 2, 3
    out = ops.to_target_vocab(logits, d2t)
    assert out.shape[-1] == 4
    assert out[0, 0] == 5.0 and out[0, 1] == float("-inf")
    assert out[0, 2] == 3.0 and out[0, 3] == 4.0    # draft 2 (3.0) over draft 1 (1.0)
    assert int(out.argmax(-1)) == 0
    logits = torch.tensor([[1.0, 6.0, 3.0, 4.0]])   # draft 1 best, but draft 2 overwrites it
    assert int(ops.to_target_vocab(logits, d2t).argmax(-1)) == 3
    assert ops.to_target_vocab(logits, None) is logits
