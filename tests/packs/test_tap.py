"""The tap API: off unless the environment names a directory, bounded, never raises."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specdoctor.experiments.taps.records import load_dir  # noqa: E402
from specdoctor.packs import tap as taps  # noqa: E402


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    for var in (taps.ENV_DIR, taps.ENV_MAX, taps.ENV_MAX_BYTES, taps.ENV_LAYERS):
        monkeypatch.delenv(var, raising=False)
    taps.reset()
    yield
    taps.reset()


def test_off_without_the_environment(tmp_path):
    assert not taps.enabled()
    assert taps.tap("attn", {"q": torch.ones(2)}, layer=0) is None
    assert not any(tmp_path.iterdir())


def test_records_round_trip_with_steps_and_meta(tmp_path, monkeypatch):
    monkeypatch.setenv(taps.ENV_DIR, str(tmp_path))
    q = torch.arange(6.0).view(1, 2, 3)
    a = taps.tap("attn", {"q": q, "seqused_k": torch.tensor([5], dtype=torch.int32)}, layer="draft.0",
                 meta={"causal": False, "window": 4})
    b = taps.tap("attn", {"q": q * 2}, layer="draft.0")
    assert a.name == "attn.draft.0.r0.s0.safetensors" and b.name == "attn.draft.0.r0.s1.safetensors"
    q.mul_(0)  # the tap copied: later changes to the tensor do not reach the dump
    recs = {r.step: r for r in load_dir(tmp_path)}
    assert recs[0].meta == {"causal": False, "window": 4} and recs[0].layer == "draft.0"
    assert torch.equal(recs[0].tensors["q"], torch.arange(6.0).view(1, 2, 3))
    assert recs[0].tensors["seqused_k"].dtype == torch.int32
    assert torch.equal(recs[1].tensors["q"], torch.arange(6.0).view(1, 2, 3) * 2)


def test_bounded_by_count_bytes_and_layers(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(taps.ENV_DIR, str(tmp_path))
    monkeypatch.setenv(taps.ENV_MAX, "2")
    got = [taps.tap("t", {"x": torch.ones(4)}, layer=0) for _ in range(4)]
    assert [g is not None for g in got] == [True, True, False, False]
    assert "limit reached" in caplog.text
    taps.reset()
    monkeypatch.setenv(taps.ENV_MAX, "100")
    monkeypatch.setenv(taps.ENV_MAX_BYTES, "100")
    assert taps.tap("big", {"x": torch.ones(16)}, layer=0) is not None  # 64 bytes
    assert taps.tap("big", {"x": torch.ones(16)}, layer=0) is None  # would pass 100
    monkeypatch.setenv(taps.ENV_LAYERS, "draft.0")
    monkeypatch.setenv(taps.ENV_MAX_BYTES, "100000")
    assert taps.tap("l", {"x": torch.ones(1)}, layer="target.0") is None
    assert taps.tap("l", {"x": torch.ones(1)}, layer="draft.0") is not None


def test_a_failing_tap_never_raises(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(taps.ENV_DIR, str(tmp_path))
    assert taps.tap("bad", {"x": object()}, layer=0) is None
    assert "tap 'bad' failed" in caplog.text
