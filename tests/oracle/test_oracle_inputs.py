"""What the oracle checks before it loads anything (runner.check_inputs): the device, a
config.json free of NaN and Infinity, the tokens asked for within the target's context; and
that --tokenizer is the tokenizer every method reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.oracle import runner
from specdoctor.oracle.runner import OracleConfig, check_inputs


def _target(tmp_path: Path, text: str | None = None) -> Path:
    d = tmp_path / "target"
    d.mkdir()
    (d / "config.json").write_text(text or json.dumps({"max_position_embeddings": 2048,
                                                       "rms_norm_eps": 1e-6}))
    return d


def test_a_sound_config_passes(tmp_path):
    check_inputs(OracleConfig(_target(tmp_path), ("p",), method="ngram", device="cpu"))


@pytest.mark.parametrize("device", ["evil", "cuda:x", "cpu; rm -rf /", ""])
def test_a_device_that_is_none(tmp_path, device):
    with pytest.raises(InputError, match="is not a device"):
        check_inputs(OracleConfig(_target(tmp_path), ("p",), method="ngram", device=device))


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_config_holding_nan_or_infinity_is_refused(tmp_path, word):
    target = _target(tmp_path, '{"max_position_embeddings": 2048, "rms_norm_eps": %s}' % word)
    with pytest.raises(InputError, match=f"holds {word}, which no model config has"):
        check_inputs(OracleConfig(target, ("p",), method="ngram", device="cpu"))


def test_tokens_past_the_context_are_refused_with_the_limit(tmp_path):
    target = _target(tmp_path)
    with pytest.raises(InputError, match="--max-tokens 100,000: past the target's context of "
                                         "2,048 tokens \\(max_position_embeddings"):
        check_inputs(OracleConfig(target, ("p",), method="ngram", device="cpu",
                                  max_tokens=100_000))
    with pytest.raises(InputError, match="context of 512 tokens \\(--max-model-len"):
        check_inputs(OracleConfig(target, ("p",), method="ngram", device="cpu",
                                  max_tokens=600, max_model_len=512))


@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_the_servers_tokenizer_is_read_for_every_method(tmp_path, monkeypatch, method):
    target = _target(tmp_path)
    server_tok = tmp_path / "server-tokenizer"
    read: list[Path] = []

    class Stop(Exception):
        pass

    def load_tokenizer(d: Path) -> None:
        read.append(d)
        raise Stop

    monkeypatch.setattr(runner, "load_tokenizer", load_tokenizer)
    config = OracleConfig(target, ("p",), method=method, device="cpu", tokenizer=server_tok,
                          draft=target if method == "draft_model" else None)
    with pytest.raises(Stop):
        runner._run(config, "cpu", None, 1, None)
    assert read == [server_tok]
