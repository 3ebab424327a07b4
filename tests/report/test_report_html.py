"""The bench report's HTML is self-contained and renders: headless Chromium (Debian's package,
installed by scripts/install.sh test) screenshots it, and the plot's own colour is on the
screen — and is not when the figures are taken out of the same page."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from tests.bench.stream_server import running
from tests.conftest import run_cli

BLUE = np.array([0x1F, 0x77, 0xB4]) / 255  # the first series' colour


def _screenshot(page: Path, out: Path) -> np.ndarray:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is missing: bash scripts/install.sh test installs it"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={out}", "--window-size=1300,2600", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    import matplotlib.image as mpimg

    return mpimg.imread(out)[:, :, :3]


def _blue_pixels(img: np.ndarray) -> int:
    return int(np.all(np.abs(img - BLUE) < 0.05, axis=2).sum())


def test_report_html_renders_its_plots_in_chromium(tmp_path: Path):
    with running("--k", "3", "--pattern", "3,1,0,2") as url:
        proc = run_cli("bench", "--url", url, "-n", "4", "--max-tokens", "16", "--suite", "code",
                       "--sampling", "greedy", "-c", "1", "--json",
                       "-o", str(tmp_path / "rep"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    page = Path(json.loads(proc.stdout)["report"]["html"])
    text = page.read_text()
    assert "src='http" not in text and "<link" not in text  # nothing fetched from elsewhere
    img = _screenshot(page, tmp_path / "shot.png")
    assert _blue_pixels(img) > 2000  # the curves and bars, drawn
    # the same page without its figures: no plot colour anywhere
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<img[^>]*>", "", text))
    assert _blue_pixels(_screenshot(bare, tmp_path / "bare.png")) < 50
