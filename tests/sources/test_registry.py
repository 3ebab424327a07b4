"""The declared engine sources: each is found by name, detects its own lines and /metrics body,
and no other engine claims them."""

from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.sources import registry

FIX = Path(__file__).resolve().parent
SAMPLES = {
    "vllm": FIX.parent / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log",
    "llamacpp": FIX / "fixtures" / "llamacpp" / "pr24536_eagle3_per_position.log",
    "sglang": FIX / "fixtures" / "sglang" / "pr6081_mtp_dp_attention.log",
}


def test_every_engine_is_registered_under_its_own_name():
    assert set(registry.ENGINES) == set(SAMPLES)
    for name, src in registry.SOURCES.items():
        assert src.name == name and src.metrics_prefixes
    with pytest.raises(InputError, match="unknown engine"):
        registry.source("tgi")


@pytest.mark.parametrize("engine", sorted(SAMPLES))
def test_each_engine_claims_its_lines_and_only_its_own(engine):
    lines = SAMPLES[engine].read_text().splitlines()
    claimed = {registry.engine_of_line(ln) for ln in lines} - {None}
    assert claimed == {engine}

