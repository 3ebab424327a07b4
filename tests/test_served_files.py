"""The readers of the served files: one failure rule for config.json, shapes from the safetensors
headers, and what a config states (causality, masks)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.served_files import (
    dflash_causal, fc_reads, read_config, safetensors_header, stated_masks, tensor_shapes,
)


def _safetensors(path: Path, header: dict) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def test_config_json_is_read_or_refused_as_bad_input(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 64}')
    assert read_config(tmp_path) == {"hidden_size": 64}
    with pytest.raises(InputError, match="no config.json in") as missing:
        read_config(tmp_path / "absent")
    assert missing.value.exit_code == 2 and "--model" in (missing.value.fix or "")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot read"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="is not a JSON object"):
        read_config(tmp_path)


def test_shapes_come_from_the_headers_and_a_refused_file_adds_none(tmp_path):
    _safetensors(tmp_path / "a.safetensors",
                 {"__metadata__": {"format": "pt"},
                  "fc.weight": {"dtype": "BF16", "shape": [64, 192], "data_offsets": [0, 0]}})
    (tmp_path / "b.safetensors").write_bytes(struct.pack("<Q", 10**9) + b"{}")
    with pytest.raises(InputError, match="header claims"):
        safetensors_header(tmp_path / "b.safetensors")
    assert tensor_shapes(tmp_path) == {"fc.weight": [64, 192]}
    assert fc_reads(tmp_path, {"hidden_size": 64}) == 3
    assert fc_reads(tmp_path, {"hidden_size": 50}) is None


def test_dflash_causality_follows_vllms_precedence():
    assert dflash_causal({"num_hidden_layers": 2}) == [False, False]
    assert dflash_causal({"num_hidden_layers": 2,
                          "layer_types": ["sliding_attention", "full_attention"]}) == [True, False]
    assert dflash_causal({"num_hidden_layers": 2, "dflash_config": {"causal": True},
                          "layer_types": ["full_attention"] * 2}) == [True, True]
    assert dflash_causal({"num_hidden_layers": 1, "is_causal": False,
                          "dflash_config": {"causal": True}}) == [False]


def test_stated_masks_of_a_plain_drafter_follow_its_window_settings():
    cfg = {"sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]}
    assert stated_masks(cfg, "eagle3", 2) == [(8, True), (None, True)]
    assert stated_masks({**cfg, "use_sliding_window": False}, "eagle3", 2) == [(None, True)] * 2
