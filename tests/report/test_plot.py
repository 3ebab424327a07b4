"""--plot with matplotlib: SVG (text kept as text) or PNG by suffix; a band where intervals
exist; the curve's pixels where the rates put them."""

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import InputError
from specdoctor.report.plot import write_plot
from specdoctor.sources.logs import read_logs
from tests.conftest import run_cli

LOG = Path(__file__).resolve().parent.parent / "fixtures" / "vllm" / "lab-ngram-k3" / "server.log"
BLUE = np.array([0x1F, 0x77, 0xB4]) / 255


def _band(svg: str) -> bool:
    return "fill-opacity: 0.18" in svg or 'fill-opacity="0.18"' in svg


def test_svg_of_a_real_log_names_its_series_and_draws_a_band_only_with_intervals(tmp_path: Path):
    from specdoctor.acceptance.profile import Interval

    total = read_logs([LOG]).total
    out = tmp_path / "c.svg"
    write_plot(out, {"ngram": total}, title="lab")
    root = ET.fromstring(out.read_text())  # well-formed
    text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert f"ngram (AL {total.mean_acceptance_length:.2f})" in text
    assert "draft position" in text and "lab" in text
    # 4 windows: too few for a 95% interval, so no band is drawn (never a band of 4 points)
    assert not total.intervals and total.intervals_unavailable and not _band(out.read_text())
    banded = total.with_intervals({f"per_position[{i}]": Interval(r - 0.05, r + 0.05)
                                   for i, r in enumerate(total.per_position)})
    write_plot(out, {"ngram": banded}, title="lab")
    assert _band(out.read_text())


def _blue_rows(png: Path) -> list[int]:
    import matplotlib.image as mpimg

    img = mpimg.imread(png)[:, :, :3]
    mask = np.all(np.abs(img - BLUE) < 0.04, axis=2)
    return [int(np.nonzero(mask[:, x])[0].mean()) for x in range(img.shape[1]) if mask[:, x].any()]


def test_png_curve_falls_where_the_rates_fall(tmp_path: Path):
    high = tmp_path / "high.png"
    low = tmp_path / "low.png"
    write_plot(high, {"a": AcceptanceProfile(10, 30, 27, (10, 9, 8), 3)})
    write_plot(low, {"a": AcceptanceProfile(10, 30, 3, (2, 1, 0), 3)})
    hi, lo = _blue_rows(high), _blue_rows(low)
    assert hi and lo
    # image rows grow downwards: a low-acceptance curve sits lower on the chart
    assert np.median(lo) > np.median(hi) + 100


def test_rate_only_profiles_and_bad_suffixes_are_refused(tmp_path: Path):
    with pytest.raises(InputError, match="per-position"):
        write_plot(tmp_path / "x.svg", {"sglang": AcceptanceProfile(None, None, None, count_weighted=False)})
    with pytest.raises(InputError, match="SVG or PNG"):
        write_plot(tmp_path / "x.pdf", {"a": AcceptanceProfile(10, 30, 3, (2, 1, 0), 3)})


def test_cli_plot_takes_png_and_refuses_txt_before_reading(tmp_path: Path):
    png = tmp_path / "curve.png"
    ok = run_cli("logs", str(LOG), "--plot", str(png), "--no-store", "--json")
    assert ok.returncode == 0, ok.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = run_cli("logs", str(LOG), "--plot", str(tmp_path / "c.txt"))
    assert bad.returncode != 0 and "SVG or PNG" in bad.stderr


def test_inline_svg_for_html_reports_names_each_curve():
    from specdoctor.report.plot import per_position_svg

    before = AcceptanceProfile(10, 30, 3, (2, 1, 0), 3)
    after = AcceptanceProfile(10, 30, 27, (10, 9, 8), 3)
    svg = per_position_svg({"before": before, "after: rope_theta=10000": after}, "counterfactual")
    root = ET.fromstring(svg)  # one well-formed element, no XML prolog or doctype
    assert root.tag.endswith("svg")
    text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "before (AL 1.30)" in text and "after: rope_theta=10000 (AL 3.70)" in text
    assert "counterfactual" in text
