"""The vocabulary check: the token string behind each id compared, then the counterfactual
through the real oracle (no server) — the lab's trained target drafting with a copy of itself
re-indexed (its tokenizer.json and embedding/lm_head rows permuted alike), as the engine runs it
(ids read as target ids) and with its ids translated back by token string."""

from __future__ import annotations

import json
import shutil
import sys

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.vocab import (
    VocabMapCheck,
    as_served_map,
    differing_ids,
    draft_to_target,
    id_strings,
)
from specdoctor.launch import LaunchSpec

TOK = {"added_tokens": [{"id": 0, "content": "<|bos|>"}, {"id": 1, "content": "<|eos|>"}],
       "model": {"type": "BPE", "vocab": {"<|bos|>": 0, "<|eos|>": 1, "a": 2, "b": 3, "ab": 4}}}


def _permuted(tok: dict, perm: dict[int, int]) -> dict:
    out = json.loads(json.dumps(tok))
    out["model"]["vocab"] = {s: perm.get(i, i) for s, i in tok["model"]["vocab"].items()}
    return out


def test_ids_are_compared_by_the_string_behind_them():
    assert id_strings(TOK) == {0: "<|bos|>", 1: "<|eos|>", 2: "a", 3: "b", 4: "ab"}
    same = draft_to_target(id_strings(TOK), id_strings(TOK), 5)
    assert same == [0, 1, 2, 3, 4] and differing_ids(same) == 0
    moved = draft_to_target(id_strings(_permuted(TOK, {2: 4, 4: 2})), id_strings(TOK), 5)
    assert moved == [0, 1, 4, 3, 2] and differing_ids(moved) == 2
    unigram = {"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["x", -1.0]]}}
    assert id_strings(unigram) == {0: "<unk>", 1: "x"}
    missing = draft_to_target({0: "<|bos|>", 1: "zz"}, id_strings(TOK), 3)
    assert missing == [0, -1, -1]


def _model_dir(path, tok, vocab_size=5):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"vocab_size": vocab_size}))
    (path / "tokenizer.json").write_text(json.dumps(tok))
    return path


def _ctx(tmp_path, target, draft, k=4):
    spec = json.dumps({"method": "draft_model", "model": str(draft), "num_speculative_tokens": k})
    la = LaunchSpec((sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                 str(target), "--dtype", "float32", "--speculative-config", spec))
    s = common.settings(la)
    ctx = Context(workdir=tmp_path / "w", launch=la, method="draft_model", k=k,
                  target_dir=target, draft_dir=draft, prompts=("def add(a, b):\n",
                                                               "import os\n\ndef main():\n"),
                  max_tokens=16)
    ctx.settings = s
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    return ctx


def test_the_oracle_reads_a_re_indexed_drafter_as_the_engine_does(tmp_path):
    t = _model_dir(tmp_path / "t", TOK)
    same = _model_dir(tmp_path / "same", TOK)
    moved = _model_dir(tmp_path / "moved", _permuted(TOK, {2: 4, 4: 2}))
    bigger = _model_dir(tmp_path / "bigger", _permuted(TOK, {2: 4, 4: 2}), vocab_size=6)
    assert as_served_map(_ctx(tmp_path, t, same)) is None
    assert as_served_map(_ctx(tmp_path, t, bigger)) is None   # sizes differ: no identity
    path = as_served_map(_ctx(tmp_path, t, moved))
    assert json.loads(path.read_text()) == {"draft_to_target": [0, 1, 2, 3, 4]}
    # where the command has vLLM translate by token string, the oracle translates too
    ctx = _ctx(tmp_path, t, moved)
    ctx.launch = ctx.launch.with_speculative(use_heterogeneous_vocab=True)
    ctx.settings = common.settings(ctx.launch)
    assert json.loads(as_served_map(ctx).read_text()) == {"draft_to_target": [0, 1, 4, 3, 2]}
    (f,) = VocabMapCheck().run(ctx, ("tokenizer-mismatch",)).findings
    assert f.verdict is Verdict.EXCLUDED and "the engine translates" in f.evidence


def _re_indexed(src, dst, seed=7):
    """A copy of ``src`` whose non-special ids are permuted in its tokenizer.json and in the rows
    of its embedding and lm_head alike: in its own vocabulary it is ``src`` exactly."""
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    tok = json.loads((dst / "tokenizer.json").read_text())
    special = {x["id"] for x in tok["added_tokens"]}
    vocab = tok["model"]["vocab"]
    movable = sorted(i for i in vocab.values() if i not in special)
    perm = dict(zip(movable, np.random.default_rng(seed).permutation(movable).tolist()))
    tok["model"]["vocab"] = {s: perm.get(i, i) for s, i in vocab.items()}
    (dst / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    new_of_old = torch.tensor([perm.get(i, i) for i in range(len(vocab))])
    w = load_file(str(dst / "model.safetensors"))
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        out = torch.empty_like(w[name])
        out[new_of_old] = w[name]
        w[name] = out
    save_file(w, str(dst / "model.safetensors"))
    return dst


def test_translating_a_re_indexed_drafters_ids_recovers_acceptance(tmp_path):
    from specdoctor.experiments.oracle_gap import run_oracle
    from specdoctor.lab import train

    target = train.trained_target("ci")
    draft = _re_indexed(target, tmp_path / "m2")
    ctx = _ctx(tmp_path, target, draft)
    ctx.oracle_vocab_map = as_served_map(ctx)
    ctx.oracle_greedy = run_oracle(ctx, 0.0, 1.0)   # as served: the engine's view
    res = VocabMapCheck().run(ctx, ("tokenizer-mismatch",))
    (f,) = res.findings
    assert f.verdict is Verdict.CONFIRMED, f.evidence
    assert "use_heterogeneous_vocab" in f.evidence   # the evidence names the fix
    assert res.numbers["ids_meaning_another_token"] > 900
    assert common.apd(res.curves["after ids translated"]) > 3.5
    assert common.apd(res.curves["before"]) < 0.5

    # the same drafter with its tokenizer.json only re-serialised: the files differ, the ids
    # do not, and nothing is run
    plain = tmp_path / "m3"
    shutil.copytree(target, plain)
    (plain / "tokenizer.json").write_text(json.dumps(json.loads(
        (target / "tokenizer.json").read_text()), indent=1))
    (f,) = VocabMapCheck().run(_ctx(tmp_path, target, plain), ("tokenizer-mismatch",)).findings
    assert f.verdict is Verdict.EXCLUDED and "every id means the same token" in f.evidence
