"""`vllm bench serve` output parsing (the recorded stdout is in the lab recordings)."""

from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.sources import vllm_bench

DM = Path(__file__).resolve().parent.parent / "fixtures" / "vllm" / "lab-draft_model-k4"


def test_section_is_read_field_by_field():
    got = vllm_bench.parse_text_section((DM / "bench_serve_stdout.txt").read_text())
    assert got["drafts"] > 0 and got["draft_tokens"] == 4 * got["drafts"]
    assert len(got["per_position_pct"]) == 4
    assert got["acceptance_length"] == pytest.approx(1 + got["accepted_tokens"] / got["drafts"], abs=0.005)


def test_missing_section_is_a_clear_error():
    with pytest.raises(InputError, match="Speculative Decoding"):
        vllm_bench.parse_text_section("============ Serving Benchmark Result ============\n")
    with pytest.raises(InputError, match="spec_decode"):
        vllm_bench.profile_from_result_json({"completed": 8})
