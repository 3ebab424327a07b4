"""`taps check` on taps of real attention calls: fp64 recompute, fp8 pages, bad dumps."""

from __future__ import annotations

import pytest

from specdoctor.errors import InputError
from specdoctor.experiments.kernels.cases import Case

torch = pytest.importorskip("torch")

from specdoctor.experiments.kernels.adapters import sdpa_paged  # noqa: E402
from specdoctor.experiments.kernels.inputs import build  # noqa: E402
from specdoctor.experiments.taps.check import check_dir  # noqa: E402
from specdoctor.packs import tap as taps  # noqa: E402

CASE = Case("t", ((30, 4), (9, 1)), window=16, causal=False, dtype="float32", data="edge")



def _call(p, shift=0, k=None, v=None):
    return sdpa_paged(p.q, p.k_cache if k is None else k, p.v_cache if v is None else v,
                      cu_seqlens_q=p.cu_seqlens_q, seqused_k=p.seqused_k, block_table=p.block_table,
                      scale=p.scale, causal=p.causal, window=p.window, shift=shift)


def _tap(p, out, layer="0", **extra):
    tensors = {"q": p.q, "k_cache": p.k_cache, "v_cache": p.v_cache, "block_table": p.block_table,
               "seqused_k": p.seqused_k, "cu_seqlens_q": p.cu_seqlens_q, "out": out, **extra}
    taps.tap("attn", tensors, layer=layer, meta={"causal": p.causal, "window": p.window})


def _by_layer(findings):
    out = {}
    for f in findings:
        out.setdefault(f.where.split(" layer ")[1].split()[0], []).append(f)
    return out


def test_right_kernel_trusted_wrong_mask_named(tapdir):
    p = build(CASE)
    _tap(p, _call(p), layer="good")
    _tap(p, _call(p, shift=1), layer="shifted")
    got = _by_layer(check_dir(tapdir))
    good = [f for f in got["good"] if f.check == "recompute"][0]
    assert good.level == "ok" and good.data["cosine"] >= 0.9999
    bad = [f for f in got["shifted"] if f.check == "recompute"][0]
    assert bad.level == "fault" and bad.data["cosine"] < 0.9999


def test_fp8_pages_dequantized_with_their_scales(tapdir):
    p = build(CASE)
    k_scale, v_scale = torch.tensor(0.05), torch.tensor(0.04)
    k8 = (p.k_cache / k_scale).to(torch.float8_e4m3fn)
    v8 = (p.v_cache / v_scale).to(torch.float8_e4m3fn)
    out = _call(p, k=k8.float() * k_scale, v=v8.float() * v_scale)  # what an fp8 kernel reads
    p.k_cache, p.v_cache = k8, v8
    _tap(p, out, layer="fp8", k_scale=k_scale, v_scale=v_scale)
    (f,) = [f for f in check_dir(tapdir) if f.check == "recompute"]
    assert f.level == "ok" and f.data["cosine"] >= 0.9999
    # dequantized wrongly (scales swapped) the same output is not trusted
    (tapdir / "attn.fp8.r0.s0.safetensors").unlink()
    taps.reset()
    _tap(p, out, layer="fp8", k_scale=v_scale * 3, v_scale=k_scale)
    (f,) = [f for f in check_dir(tapdir) if f.check == "recompute"]
    assert f.level == "fault"


def test_fp8_pages_without_scales_are_an_error(tapdir):
    p = build(CASE)
    p.k_cache = p.k_cache.to(torch.float8_e4m3fn)
    _tap(p, torch.zeros_like(p.q))
    with pytest.raises(InputError, match="no k_scale was tapped"):
        check_dir(tapdir)


@pytest.mark.parametrize("change,message", [
    (lambda p: setattr(p, "block_table", p.block_table + 50), "points outside the cache"),
    (lambda p: p.q.__setitem__((0, 1, 2), float("nan")), "q holds NaN"),
    (lambda p: setattr(p, "q", p.q[:, :3]), "not a multiple of H_kv"),
])
def test_bad_dumps_one_message_each(tapdir, change, message):
    p = build(CASE)
    out = _call(p)
    change(p)
    _tap(p, out)
    with pytest.raises(InputError, match=message):
        check_dir(tapdir)


def test_missing_tensor_is_named(tapdir):
    p = build(CASE)
    taps.tap("attn", {"q": p.q, "k_cache": p.k_cache, "v_cache": p.v_cache, "out": _call(p)}, layer="x")
    with pytest.raises(InputError, match="has no tensor block_table, seqused_k, cu_seqlens_q"):
        check_dir(tapdir)


def test_zero_heads_and_empty_index_sets(tapdir):
    out = torch.randn(1, 4, 8)
    out[:, 1:] = 0
    taps.tap("sparse", {"out": out, "topk_indices": torch.full((1, 4), -1)}, layer="d", rank=1)
    taps.tap("sparse", {"out": torch.randn(1, 4, 8), "topk_indices": torch.tensor([[0, 3, -1, -1]])},
             layer="d", rank=0)
    found = {(f.check, f.data.get("rank")) for f in check_dir(tapdir) if f.level == "fault"}
    assert found == {("zero-heads", 1), ("empty-indices", 1)}
