"""`specdoctor oracle` as a user runs it: on the lab's tiny random target (no server), against a
recorded run, and the refusals."""

import json
import struct
from pathlib import Path

import pytest

from specdoctor.store.db import open_store
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def target() -> Path:
    pytest.importorskip("transformers")
    from specdoctor.lab.models import target_model

    return target_model()


def test_ngram_oracle_prints_a_profile_labelled_oracle(target, isolated_store):
    proc = run_cli("oracle", "--target", str(target), "--method", "ngram", "--k", "3",
                   "-n", "3", "--max-tokens", "12", "--near-ties", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["label"] == "oracle" and out["config"]["method"] == "ngram"
    total = out["total"]
    assert total["k"] == 3 and total["draft_tokens"] <= 3 * total["drafts"]
    assert [len(r["output_ids"]) for r in out["requests"]] == [12, 12, 12]
    assert out["cost"]["tokens_per_s"] > 0 and out["cost"]["implementation"].startswith("transformers")
    assert out["run_id"] >= 1
    (flips,) = out["numerics"]  # ngram: the target only
    assert flips["dtype"] == "bfloat16" and flips["positions"] == 3 * 12  # every output token is predicted
    assert flips["flips"] == _flips_by_hand(target, out["requests"])


def _flips_by_hand(target: Path, requests: list[dict]) -> int:
    """The same count, computed here: each output token's predicting position, teacher-forced
    in fp32 and in bf16, argmaxes compared."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specdoctor.bench.prompts import take

    tok = AutoTokenizer.from_pretrained(str(target))
    a, b = (AutoModelForCausalLM.from_pretrained(str(target), dtype=d,
                                                 attn_implementation="eager").eval()
            for d in (torch.float32, torch.bfloat16))
    flips = 0
    for prompt, r in zip(take("code", 3), requests):
        p = tok(prompt)["input_ids"]
        ids = torch.tensor([p + r["output_ids"][:-1]])
        with torch.inference_mode():
            x = a(input_ids=ids).logits[0, len(p) - 1:].argmax(-1)
            y = b(input_ids=ids).logits[0, len(p) - 1:].float().argmax(-1)
        flips += int((x != y).sum())
    return flips


def test_compare_against_a_recorded_run(target, isolated_store):
    # The oracle in-process, then a "measured" run far below it, compared through the CLI.
    from specdoctor.bench.prompts import take
    from specdoctor.oracle.runner import OracleConfig, run_oracle

    prompts = take("code", 4)
    oracle = run_oracle(OracleConfig(target, tuple(prompts), method="ngram", k=3, max_tokens=16))
    store = open_store(None)
    reqs = []
    for i, t in enumerate(oracle.traces):
        drafts, _, _, _ = t.counts(3)
        reqs.append({"index": i, "prompt": prompts[i], "completion_tokens": 16, "latency_s": 0.1,
                     "profile": {"drafts": drafts, "accepted_per_position": [0, 0, 0]}})
    low = store.add_run(kind="measure", engine="vllm", target="http://x", params={},
                        result={"params": {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0}},
                        profile=None, requests=reqs)
    store.close()
    assert oracle.profile.per_position[0] > 0.2  # prompt lookup does find matches here
    proc = run_cli("oracle", "--target", str(target), "--method", "ngram", "--k", "3",
                   "--compare", str(low), "--no-store")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "oracle vs measured run" in proc.stdout
    assert "verdict: the engine loses acceptance" in proc.stdout


def _fake_model(root: Path, name: str, vocab: dict) -> Path:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"vocab_size": len(vocab)}))
    (d / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode()
                                          + bytes(16))
    return d


def test_refusals_name_the_problem(tmp_path):
    t = _fake_model(tmp_path, "t", {"a": 0, "b": 1})
    d = _fake_model(tmp_path, "d", {"a": 0, "b": 1, "c": 2})
    proc = run_cli("oracle", "--target", str(t), "--draft", str(d))
    assert proc.returncode == 2
    assert "do not share a vocabulary" in proc.stderr and "vocab_size 2 (target) vs 3" in proc.stderr
    assert "--vocab-map" in proc.stderr
    proc = run_cli("oracle", "--target", str(t))
    assert proc.returncode == 2 and "--method ngram" in proc.stderr
    proc = run_cli("oracle", "--target", str(t), "--method", "ngram", "--sampling", "hot")
    assert proc.returncode == 2 and "T,top_p" in proc.stderr
    proc = run_cli("oracle", "--method", "ngram")
    assert proc.returncode == 2 and "--target" in proc.stderr
