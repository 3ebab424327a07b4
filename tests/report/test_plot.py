"""The per-position SVG: well-formed, one point per position, a band where intervals exist."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import InputError
from specdoctor.report.plot import per_position_svg
from specdoctor.sources.logs import read_logs

NS = "{http://www.w3.org/2000/svg}"
LOG = Path(__file__).resolve().parent.parent / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"


def test_curve_of_a_real_log_with_its_interval_band():
    total = read_logs([LOG]).total
    root = ET.fromstring(per_position_svg({"ngram": total}, title="lab"))
    line = root.find(f"{NS}polyline")
    points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert len(points) == 3
    ys = [y for _, y in points]
    assert ys == sorted(ys)  # the recorded profile decays: each point lower on the chart
    assert root.find(f"{NS}polygon") is not None  # the 95% band


def test_two_series_and_no_band_without_intervals():
    a = AcceptanceProfile(10, 30, 15, (8, 5, 2), 3)
    b = AcceptanceProfile(10, 30, 7, (5, 2, 0), 3)
    root = ET.fromstring(per_position_svg({"oracle": a, "measured": b}))
    assert len(root.findall(f"{NS}polyline")) == 2
    assert root.find(f"{NS}polygon") is None


def test_rate_only_profiles_cannot_be_plotted():
    with pytest.raises(InputError, match="per-position"):
        per_position_svg({"sglang": AcceptanceProfile(None, None, None, count_weighted=False)})
