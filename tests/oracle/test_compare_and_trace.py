"""Comparison verdicts on synthetic units, the engine hook's log against oracle traces, and the
refusals that come before any model is loaded."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from specdoctor.errors import InputError
from specdoctor.oracle import compare, engine_trace, models
from specdoctor.oracle.simulate import RequestTrace, Step


def _units(rates, drafts=10, n=12, jitter=0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        acc = [min(drafts, max(0, round(r * drafts + rng.integers(-jitter, jitter + 1))))
               for r in rates]
        acc = np.minimum.accumulate(acc)  # prefix-closed
        rows.append([drafts, *acc])
    return np.array(rows, dtype=float)


def test_two_draws_of_the_same_rates_show_no_gap():
    a = _units([0.8, 0.6, 0.4], jitter=2)
    b = _units([0.8, 0.6, 0.4], jitter=2, seed=7)
    assert not (a == b).all()  # two samples, not one array twice
    c = compare.compare_units(a, b)
    assert all(not p.significant for p in c.positions), c.to_json()
    assert all(p.gap.low < 0 < p.gap.high for p in c.positions)
    assert "reaches" in c.verdict


def test_a_small_shift_is_found_with_enough_prompts():
    c = compare.compare_units(_units([0.8, 0.6, 0.4], n=60), _units([0.7, 0.6, 0.4], n=60))
    assert [p.significant for p in c.positions] == [True, False, False]
    assert c.positions[0].gap.value == pytest.approx(0.1)


def test_measured_well_below_the_oracle_is_an_engine_loss():
    c = compare.compare_units(_units([0.8, 0.6, 0.4], jitter=1),
                              _units([0.5, 0.1, 0.0], jitter=1, seed=1))
    assert [p.significant for p in c.positions] == [True, True, True]
    assert c.positions[0].gap.value == pytest.approx(0.3, abs=0.05)
    assert c.verdict.startswith("the engine loses acceptance")


def test_both_low_means_a_weak_drafter():
    c = compare.compare_units(_units([0.2, 0.05, 0.0], jitter=1),
                              _units([0.2, 0.05, 0.0], jitter=1, seed=3))
    assert "drafter is weak" in c.verdict
    high = compare.compare_units(_units([0.8, 0.5]), _units([0.8, 0.5], seed=3))
    assert "drafter is weak" not in high.verdict


def test_measured_above_the_oracle_is_engine_side():
    c = compare.compare_units(_units([0.2, 0.1]), _units([0.9, 0.8]))
    assert "ABOVE" in c.verdict and "engine-side" in c.verdict


def _trace():
    # prompt [7]; prefill emits 1; step: drafts [2, 9] -> 1 accepted, correction 3;
    # then a draft-less decode step emitting 4.
    steps = [Step(1, 2, [2, 9], [1.0, 0.0], 1, [2, 3], [5.0, 0.01, 2.0], [3.0, 3.0])]
    return RequestTrace(0, 0, [7], [1, 2, 3, 4], steps)


def _log(tmp_path: Path, rows) -> Path:
    p = tmp_path / "drafts.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_engine_log_identical_to_the_oracle(tmp_path):
    log = _log(tmp_path, [
        {"req": "a", "prompt": [7], "draft": [], "out": [1]},
        {"req": "a", "draft": [2, 9], "out": [2, 3]},
        {"req": "a", "draft": [], "out": [4]},
    ])
    reqs = engine_trace.read(log)
    assert reqs[0].output_ids == [1, 2, 3, 4]
    a = engine_trace.agreement(reqs, [_trace()])
    assert (a.requests, a.identical_requests, a.divergences) == (1, 1, [])
    assert a.draft_tokens_compared == a.draft_tokens_equal == 2
    assert a.steps_same_accepted == a.steps_compared == 3


def test_engine_divergence_is_located_with_the_oracles_margin(tmp_path):
    log = _log(tmp_path, [
        {"req": "a", "prompt": [7], "draft": [], "out": [1]},
        {"req": "a", "draft": [2, 9], "out": [2, 5]},  # the engine corrected to 5, not 3
        {"req": "b", "prompt": [8], "draft": [], "out": [1]},  # a prompt the oracle never ran
    ])
    a = engine_trace.agreement(engine_trace.read(log), [_trace()])
    assert a.unmatched_engine_requests == 1 and a.identical_requests == 0
    d = a.divergences[0]
    assert (d.step, d.output_position, d.what, d.engine, d.oracle) == (1, 2, "emitted", [2, 5], [2, 3])
    assert d.target_margin == pytest.approx(0.01)  # a near-tie: the report says so


def test_an_engine_request_with_more_steps_than_the_oracle_diverges(tmp_path):
    log = _log(tmp_path, [
        {"req": "a", "prompt": [7], "draft": [], "out": [1]},
        {"req": "a", "draft": [2, 9], "out": [2, 3]},
        {"req": "a", "draft": [], "out": [4]},
        {"req": "a", "draft": [], "out": [6]},  # a step the oracle never took
    ])
    a = engine_trace.agreement(engine_trace.read(log), [_trace()])
    assert a.identical_requests == 0
    assert [d.what for d in a.divergences] == ["length"]


def test_hook_errors_are_reported_not_hidden(tmp_path):
    with pytest.raises(RuntimeError, match="hook failed"):
        engine_trace.read(_log(tmp_path, [{"error": "AttributeError('x')"}]))


def test_hook_env_puts_the_hook_first_on_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = engine_trace.hook_env(tmp_path / "d.jsonl")
    assert env["PYTHONPATH"].split(":")[0] == str(engine_trace.HOOK_DIR)
    assert engine_trace.HOOK_DIR.name == "draft_trace"
    assert env["PYTHONPATH"].endswith("/elsewhere")
    assert (engine_trace.HOOK_DIR / "sitecustomize.py").is_file()


def _model_dir(root: Path, name: str, vocab: dict, vocab_size: int, shape=(4, 2)) -> Path:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"vocab_size": vocab_size}))
    (d / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}, "added_tokens": []}))
    header = json.dumps({"w": {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 0]}})
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode())
    return d


def test_different_vocabularies_are_refused_with_the_mismatch_named(tmp_path):
    t = _model_dir(tmp_path, "t", {"a": 0, "b": 1}, 2)
    same = _model_dir(tmp_path, "same", {"a": 0, "b": 1}, 2)
    swapped = _model_dir(tmp_path, "swapped", {"a": 1, "b": 0}, 2)
    bigger = _model_dir(tmp_path, "bigger", {"a": 0, "b": 1, "c": 2}, 3)
    models.check_vocab(t, same, None)
    with pytest.raises(InputError, match="tokenizers differ on 2 token strings"):
        models.check_vocab(t, swapped, None)
    with pytest.raises(InputError, match=r"vocab_size 2 \(target\) vs 3 \(draft\)"):
        models.check_vocab(t, bigger, None)
    mp = tmp_path / "map.json"
    mp.write_text(json.dumps({"draft_to_target": [1, 0]}))
    models.check_vocab(t, swapped, models.VocabMap.load(mp))  # a mapping makes it defined
    with pytest.raises(InputError, match="one-to-one"):
        models.VocabMap((0, 0)).target_to_draft(2)


def test_models_too_large_are_refused_before_loading(tmp_path, monkeypatch):
    d = _model_dir(tmp_path, "big", {"a": 0}, 1, shape=(1000, 1000))
    assert models.param_count(d) == 1_000_000
    monkeypatch.setattr(models, "available_bytes", lambda device: 100 * 2**20)
    with pytest.raises(InputError, match="do not fit on cpu"):
        models.check_fits([d], "cpu", "float32")
    monkeypatch.setattr(models, "available_bytes", lambda device: 8 * 2**30)
    assert models.check_fits([d], "cpu", "float32") > 4_000_000


def test_server_settings_come_from_the_recorded_launch_command():
    sc = json.dumps({"method": "draft_model", "model": "/d", "num_speculative_tokens": 4})
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/t",
            "--dtype", "float32", "--max-model-len", "1024", "--speculative-config", sc,
            "--dtype", "bfloat16"]  # extra args override: argparse keeps the last one
    run = compare.MeasuredRun(1, {}, [], np.zeros((1, 5)), {"argv": argv})
    assert run.server_settings() == {
        "target": "/t", "max_model_len": "1024", "dtype": "bfloat16", "method": "draft_model",
        "k": 4, "draft": "/d", "prompt_lookup_min": None, "prompt_lookup_max": None,
        "draft_sample_method": "greedy"}
    assert compare.MeasuredRun(2, {}, [], np.zeros((1, 5)), None).server_settings() == {}
