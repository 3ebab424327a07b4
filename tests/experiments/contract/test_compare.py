"""The comparison rules of the drafter's contract, on a contract written by hand (what vLLM reads
is tested against the installed vLLM in test_vllm_contract.py): which differences are suspects,
with which values to try, and which keys are said unchecked or ignored."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from specdoctor.experiments.contract import compare as cmp
from specdoctor.experiments.contract import tokens
from specdoctor.experiments.contract.contract import AuxRule, Contract
from specdoctor.experiments.contract.reads import Cfg, Lit, Read, TensorRule

M = "vllm/model_executor/models/head.py"


def _read(key: str, how: str = "getattr", default: str | None = None, **kw) -> Read:
    return Read(key, how, f"{M}:1 (Head.__init__)", default, **kw)


def _contract(*reads: Read, tensors: tuple = (), aux: AuxRule | None = None,
              oracle: frozenset[str] | None = None) -> Contract:
    return Contract("eagle3", "vLLM test", "vllm.model_executor.models.head.Head", list(reads),
                    list(tensors), aux, [], oracle)


FACTS = tokens.TokenizerFacts(size=1000, ordinary=frozenset(range(3, 1000)),
                              special={0: "<s>", 1: "</s>", 2: "<pad>"},
                              roles={"bos": 0, "eos": 1, "pad": 2})
TARGET = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4, "vocab_size": 1024,
          "rms_norm_eps": 1e-6}


def _review(c: Contract, draft: dict, **kw) -> cmp.Review:
    return cmp.review(c, cmp.Inputs("eagle3", draft, kw.pop("target", TARGET), **kw))


def _suspect(r: cmp.Review, key: str) -> cmp.Suspect:
    (s,) = [s for s in r.suspects if s.key == key]
    return s


# -- token ids ------------------------------------------------------------------------------------

def test_a_placeholder_token_must_be_special_and_not_the_sequences_own():
    c = _contract(_read("dflash_config.mask_token_id", "get"))
    ok = _review(c, {"dflash_config": {"mask_token_id": 2}}, tokenizer=FACTS)
    assert ok.suspects == [] and any("mask_token_id 2" in x for x in ok.checked)
    ordinary = _suspect(_review(c, {"dflash_config": {"mask_token_id": 500}}, tokenizer=FACTS,
                                token_counts={500: 7}), "dflash_config.mask_token_id")
    assert ordinary.strength == "problem" and "ordinary text produces it" in ordinary.why
    assert "occurs 7 times" in ordinary.why
    assert [x.value for x in ordinary.candidates] == [2, 1000]   # pad, then a reserved row
    eos = _suspect(_review(c, {"dflash_config": {"mask_token_id": 1}}, tokenizer=FACTS),
                   "dflash_config.mask_token_id")
    assert "every sequence carries it" in eos.why
    # an id past the tokenizer but inside the embedding is a reserved row: fine
    assert _review(c, {"dflash_config": {"mask_token_id": 1010}}, tokenizer=FACTS).suspects == []
    # no embedding row: cannot be right
    far = _suspect(_review(c, {"dflash_config": {"mask_token_id": 5000}}, tokenizer=FACTS),
                   "dflash_config.mask_token_id")
    assert "no row in the 1024-token embedding" in far.why
    unknown = _review(c, {"dflash_config": {"mask_token_id": 500}})
    assert unknown.suspects == [] and "no tokenizer" in unknown.unchecked[0][1]


def test_the_tokenizer_files_are_read_for_specials_roles_and_the_ordinary_vocabulary(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({
        "model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "<pad>": 2, "a": 3, "b": 4}},
        "added_tokens": [{"id": i, "content": c, "special": True}
                         for i, c in enumerate(("<s>", "</s>", "<pad>"))]}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": {"content": "</s>"}, "pad_token": "<pad>"}))
    facts = tokens.read(tmp_path)
    assert facts is not None and facts.size == 5 and facts.ordinary == {3, 4}
    assert facts.roles == {"bos": 0, "eos": 1, "pad": 2}
    assert tokens.placeholders(facts, 8) == [(2, "the tokenizer's special token '<pad>' "
                                                  "(the pad token)"),
                                             (5, "the first reserved id past the tokenizer's "
                                                 "vocabulary")]


# -- layer ids ------------------------------------------------------------------------------------

AUX = AuxRule({"eagle_aux_hidden_state_layer_ids": 0,
               "eagle_config.eagle_aux_hidden_state_layer_ids": 0,
               "dflash_config.target_layer_ids": 1}, 0, 4, (2, 2, 1), "tuple(sorted(set(layers)))")
FC3 = {"fc.weight": [128, 384]}


def _aux_contract() -> Contract:
    return _contract(*[_read(k, "get") for k in AUX.offsets], aux=AUX)


def test_in_range_ids_that_fit_every_file_check_are_searched_over_every_set():
    r = _review(_aux_contract(), {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}, shapes=FC3)
    s = _suspect(r, "eagle_aux_hidden_state_layer_ids")
    assert s.search and s.strength == "search"
    tried = [tuple(c.value) for c in s.candidates]
    assert len(tried) == 9 and (1, 2, 3) not in tried and (0, 1, 2) in tried   # C(5, 3) - 1
    assert any("no file says which layers" in x for x in r.checked)


def test_ids_out_of_range_are_a_problem_first_tried_shifted_back():
    c = _aux_contract()
    dflash = {"dflash_config": {"target_layer_ids": [-1, 0]}}
    r = cmp.review(c, cmp.Inputs("dflash", dflash, TARGET, {"fc.weight": [128, 256]}))
    s = _suspect(r, "dflash_config.target_layer_ids")
    assert s.strength == "problem" and "[-1] outside 0..3" in s.why
    assert s.candidates[0].value == [0, 1] and "shifted back" in s.candidates[0].source
    assert s.candidates[0].edits == (("dflash_config.target_layer_ids", [0, 1]),)


def test_copies_that_disagree_and_a_count_the_fc_cannot_take_are_problems():
    c = _aux_contract()
    two = {"eagle_aux_hidden_state_layer_ids": [1, 2, 3],
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}}
    s = _suspect(_review(c, two, shapes=FC3), "eagle_aux_hidden_state_layer_ids")
    assert s.strength == "problem" and "copies disagree" in s.why
    # both copies are written with each candidate
    assert {k for k, _ in s.candidates[0].edits} == {
        "eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids"}
    dup = _suspect(_review(c, {"eagle_aux_hidden_state_layer_ids": [1, 2, 2]}, shapes=FC3),
                   "eagle_aux_hidden_state_layer_ids")
    assert "taps 2 distinct states" in dup.why and "fc reads 3" in dup.why


def test_no_ids_named_means_vllms_default_applies_and_is_suspect():
    aux = AuxRule(AUX.offsets, 0, 7, (2, 3, 4), "tuple(sorted(set(layers)))")
    c = _contract(*[_read(k, "get") for k in aux.offsets], aux=aux)
    s = _suspect(_review(c, {}, shapes=FC3, target={**TARGET, "num_hidden_layers": 7}),
                 "eagle_aux_hidden_state_layer_ids")
    assert s.value is cmp.ABSENT and "default [2, 3, 4]" in s.why and s.search
    assert [2, 3, 4] not in [c.value for c in s.candidates]        # the served set
    assert len(s.candidates) == 55                                  # C(8, 3) - 1


def test_training_metadata_naming_the_ids_is_the_first_candidate():
    meta = {"training.eagle_aux_hidden_state_layer_ids": [0, 1, 2]}
    s = _suspect(_review(_aux_contract(), {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]},
                         shapes=FC3, metadata=meta), "eagle_aux_hidden_state_layer_ids")
    assert s.candidates[0].value == [0, 1, 2] and "training metadata" in s.candidates[0].source


def test_training_metadata_is_read_from_the_checkpoint_not_from_private_records(tmp_path):
    header = json.dumps({"__metadata__": {"format": "pt", "target_layer_ids": "[0, 1]"}})
    raw = header.encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    (tmp_path / "training_args.json").write_text(json.dumps({"run": {"mask_token_id": 7}}))
    (tmp_path / "specdoctor-build.json").write_text(json.dumps({"target_layer_ids": [5]}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"pad_token": "x"}))
    assert cmp.training_metadata(tmp_path) == {"target_layer_ids": [0, 1],
                                               "run.mask_token_id": 7}


# -- flags, values, masks -------------------------------------------------------------------------

FLAG = TensorRule("fc.", f"{M}:9 (Head.load_weights)",
                  Cfg("eagle_config.use_aux_hidden_state", Lit(True)), keep_when=True)


def test_a_flag_that_drops_tensors_the_checkpoint_ships_is_a_problem():
    c = _contract(_read("eagle_config.use_aux_hidden_state", "in"), tensors=(FLAG,))
    off = {"eagle_config": {"use_aux_hidden_state": False}}
    s = _suspect(_review(c, off, shapes=FC3), "eagle_config.use_aux_hidden_state")
    assert s.strength == "problem" and s.candidates[0].value is True and "fc.weight" in s.why
    assert _review(c, {}, shapes=FC3).suspects == []               # the default keeps them
    bare = _review(c, off, shapes={})                                # nothing shipped to drop
    assert bare.suspects == [] and "use_aux_hidden_state = false" in bare.unchecked[0][1]
    skip = _contract(tensors=(TensorRule("t2d", f"{M}:5 (Head.load_weights)"),))
    assert any("t2d" in x for x in _review(skip, {}, shapes={"t2d": [1024]}).ignored)


def test_a_value_is_compared_with_the_target_then_with_vllms_default():
    c = _contract(_read("rms_norm_eps", "attribute"), _read("logit_scale", default="1.0"),
                  _read("hidden_act", "attribute"))
    r = _review(c, {"model_type": "llama", "rms_norm_eps": 1.0, "logit_scale": 0.5,
                    "hidden_act": "gelu", "unread_key": 3})
    assert _suspect(r, "rms_norm_eps").candidates[0].value == 1e-6
    scale = _suspect(r, "logit_scale")
    assert scale.strength == "differs" and scale.candidates[0].value is cmp.ABSENT
    other = _review(c, {"model_type": "gemma", "logit_scale": 0.5})
    assert _suspect(other, "logit_scale").strength == "default"     # across architectures
    # no reference at all: said so, no lead
    assert [h for h, t in r.unchecked if t.startswith("hidden_act")] == ["draft-config-mismatch"]
    assert "unread_key (3)" in r.ignored


def test_sizes_and_identities_are_not_compared_with_the_target():
    c = _contract(_read("hidden_size", "attribute"), _read("model_type", "attribute"))
    r = _review(c, {"hidden_size": 64, "model_type": "gemma"})
    assert r.suspects == []
    assert any(x.startswith("hidden_size 64: a size") for x in r.checked)


def test_how_far_a_drafter_reads_is_a_value_unless_a_position_table_pins_it():
    """vllm#34734: published EAGLE3 heads cap max_position_embeddings at 2048 under targets that
    serve far longer; vLLM stops drafting past the head's limit. With rotary positions no tensor
    pins the key, so it is compared with the target's."""
    c = _contract(_read("max_position_embeddings", "attribute"))
    target = {**TARGET, "max_position_embeddings": 1024}
    low = _suspect(_review(c, {"max_position_embeddings": 64}, target=target),
                   "max_position_embeddings")
    assert low.hypothesis == "draft-config-mismatch"
    assert [x.value for x in low.candidates] == [1024] and "below the target's" in low.why
    same = _review(c, {"max_position_embeddings": 1024}, target=target)
    assert same.suspects == [] and any("at least the target's" in x for x in same.checked)
    # a learned position table of that many rows: a size, pinned by the checkpoint
    table = _review(c, {"max_position_embeddings": 64}, target=target,
                    shapes={"embed_positions.weight": [64, 128]})
    assert table.suspects == [] and any("a size" in x for x in table.checked)
    # nothing to compare with: said unchecked
    none = _review(c, {"max_position_embeddings": 64})
    assert none.suspects == [] and any("max_position_embeddings 64" in t
                                       for _h, t in none.unchecked)


def test_a_mask_field_is_compared_with_the_target_else_the_default():
    c = _contract(_read("dflash_config.use_swa", "get", "False"),
                  _read("dflash_config.causal", "get"), _read("sliding_window", "attribute"))
    r = _review(c, {"dflash_config": {"use_swa": True, "causal": False}, "sliding_window": 8})
    s = _suspect(r, "dflash_config.use_swa")
    assert s.hypothesis == "attention-mask" and s.candidates[0].value is False
    assert not [x for x in r.suspects if x.key == "dflash_config.causal"]   # False = default
    assert [h for h, t in r.unchecked if t.startswith("sliding_window")] == ["attention-mask"]
    with_target = _review(c, {"sliding_window": 8}, target={**TARGET, "sliding_window": 8})
    assert with_target.suspects == []


def test_a_per_layer_list_is_compared_by_its_entries_not_its_length():
    # a 1-layer drafter of a 4-layer target: its layer_types is shorter by design
    c = _contract(_read("layer_types"))
    target = {**TARGET, "layer_types": ["full_attention"] * 4}
    draft = {"model_type": "llama", "num_hidden_layers": 1}
    ok = _review(c, {**draft, "layer_types": ["full_attention"]}, target=target)
    assert ok.suspects == [] and any("layer_types: one entry per layer" in x for x in ok.checked)
    odd = _suspect(_review(c, {**draft, "layer_types": ["sliding_attention"]}, target=target),
                   "layer_types")
    assert [x.value for x in odd.candidates] == [["full_attention"]]
    # of the same length the lists are compared whole, as any value
    same = _suspect(_review(c, {**draft, "num_hidden_layers": 4,
                                "layer_types": ["sliding_attention"] * 4}, target=target),
                    "layer_types")
    assert same.candidates[0].value == ["full_attention"] * 4
