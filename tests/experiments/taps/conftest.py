"""A fresh tap directory, with the tap gate pointed at it and the per-process budget reset."""

from __future__ import annotations

import pytest


@pytest.fixture
def tapdir(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from specdoctor.experiments.taps import tap as taps

    monkeypatch.setenv(taps.ENV_DIR, str(tmp_path))
    taps.reset()
    yield tmp_path
    taps.reset()
