"""sweep --flag NAME=V1,V2: a server flag's values swept beside k (pure planning)."""

from __future__ import annotations

import pytest

from specdoctor.cli.sweep import parse_flags, plan_configs
from specdoctor.errors import InputError

LLAMA = "llama-server -m t.gguf -md d.gguf --spec-type draft-simple --spec-draft-n-max 4"


def test_each_configuration_runs_with_each_value_of_each_flag() -> None:
    flags = parse_flags(("spec-draft-p-min=0,0.75", "--spec-draft-n-min=0,2"))
    configs = plan_configs(LLAMA, {}, False, (2, 4), (), (), True, "completions", flags)
    assert configs[0].label == "spec-off"
    off = configs[0].spec.argv
    assert "-md" not in off and not any(a.startswith("--spec-") for a in off)
    swept = configs[1:]
    assert len(swept) == 2 * 2 * 2
    first = swept[0].spec.argv
    assert swept[0].label == "draft_model:k=2:spec-draft-p-min=0:spec-draft-n-min=0"
    assert first[first.index("--spec-draft-n-max") + 1] == "2"
    last = swept[-1].spec.argv
    assert (last[last.index("--spec-draft-p-min") + 1], last[last.index("--spec-draft-n-min") + 1]
            ) == ("0.75", "2")
    assert len({c.label for c in swept}) == len(swept)


@pytest.mark.parametrize("bad", ["--spec-draft-p-min", "=0,1", "--=1", "--x=", "--a b=1"])
def test_a_malformed_flag_is_bad_input(bad: str) -> None:
    with pytest.raises(InputError, match="NAME=V1,V2"):
        parse_flags((bad,))


def test_a_flag_given_twice_is_bad_input() -> None:
    with pytest.raises(InputError, match="given twice"):
        parse_flags(("--x=1", "x=2"))
