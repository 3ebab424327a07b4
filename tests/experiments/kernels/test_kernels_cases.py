"""Case descriptions: a case too large for memory is refused, with the limit, before any tensor."""

from __future__ import annotations

import json

import pytest

from specdoctor.errors import InputError
from specdoctor.experiments.kernels.cases import MAX_ELEMENTS, SUITES, Case, load_suite


def test_every_built_in_case_is_within_the_limit():
    for name, suite in SUITES.items():
        assert suite(), name  # building a suite validates its cases


def test_a_case_past_the_limit_is_refused_naming_it(tmp_path):
    with pytest.raises(InputError, match=f"past the limit of {MAX_ELEMENTS:,}"):
        Case("huge", ((10 ** 8, 8),))
    f = tmp_path / "suite.json"
    f.write_text(json.dumps([{"seqs": [[10 ** 8, 8]]}]))
    with pytest.raises(InputError, match="KV cache of"):
        load_suite(str(f))


@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b"\0" * 64, b"[{\"seqs\": [[1, 1]], \"heads_q\": \"8\"}]"])
def test_a_suite_that_is_no_json_list_of_cases_is_bad_input(tmp_path, content):
    f = tmp_path / "suite.json"
    f.write_bytes(content)
    with pytest.raises(InputError):
        load_suite(str(f))
