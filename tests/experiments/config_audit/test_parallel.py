"""The parallel audit with the installed vLLM (no server; vLLM builds configs on CPU): Case B's
field dropped by create_draft_parallel_config, which proposer puts what back, and fields taken
from the class at run time."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from specdoctor.experiments.config_audit import parallel as par

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")


@pytest.fixture(scope="module")
def audit():
    from specdoctor.lab.models import target_model

    return par.audit_parallel(target_model())


def _var(audit, name):
    return next(v for v in audit.variations if v.name == name)


def _method(var, name):
    return next(m for m in var.methods if m.method == name)


def test_create_draft_parallel_config_drops_dcp(audit):
    v = _var(audit, "tp4-dcp2")
    assert v.error is None
    dropped = {d.field: (d.target, d.draft) for d in v.dropped_by_create}
    assert dropped["decode_context_parallel_size"] == ("2", "1")  # Case B
    assert dropped["dcp_kv_cache_interleave_size"] == ("2", "1")


def test_draft_model_restores_most_dcp_fields_but_not_the_interleave(audit):
    m = _method(_var(audit, "tp4-dcp2"), "draft_model")
    assert m.error is None and not m.shares_target
    assert {"decode_context_parallel_size", "dcp_comm_backend"} <= set(m.restored)
    lost = {d.field: (d.target, d.draft) for d in m.lost}
    assert lost["dcp_kv_cache_interleave_size"] == ("2", "1")  # ENGINES.md's reading, verified
    assert "decode_context_parallel_size" not in lost


def test_hidden_state_drafters_run_with_the_targets_object(audit):
    v = _var(audit, "tp4-dcp2")
    for name in ("eagle3", "mtp", "dflash", "ngram"):
        m = _method(v, name)
        assert m.error is None and m.shares_target and not m.lost, m.to_json()


def test_a_field_added_at_run_time_is_audited():
    from pydantic import ConfigDict
    from pydantic.dataclasses import dataclass
    from vllm.config import ParallelConfig

    @dataclass(config=ConfigDict(arbitrary_types_allowed=True))
    class Extended(ParallelConfig):
        specdoctor_added_field: int = 0

    assert "specdoctor_added_field" in par.field_names(Extended)
    res = par.audit_parallel(None, [par.Variation("x", {"tensor_parallel_size": 2,
                                                          "specdoctor_added_field": 7})],
                             methods=("draft_model",), parallel_cls=Extended)
    dropped = {d.field: (d.target, d.draft) for d in res.variations[0].dropped_by_create}
    assert dropped == {"specdoctor_added_field": ("7", "(absent)")}
    assert "pass a model directory" in res.variations[0].methods[0].error
    assert dataclasses.fields(ParallelConfig)[-1].name != "specdoctor_added_field"
