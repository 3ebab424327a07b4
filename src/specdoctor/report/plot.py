"""Per-position acceptance curves as a self-contained SVG (no plotting library needed).

A cliff (Case A: 0.5, 0.25, 0) and a healthy decay (0.73, 0.52, 0.36) look alike in a table of
three numbers and nothing alike on a curve. Each series is drawn with its 95% interval band
when the profile has one; rates are unconditional (vLLM's convention), as the axis says.

    svg = per_position_svg({"measured": profile, "oracle": other}, title="lab · k=4")
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import InputError

WIDTH, HEIGHT = 720, 400
LEFT, RIGHT, TOP, BOTTOM = 64, 210, 48, 56
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


def _xy(i: int, rate: float, k: int) -> tuple[float, float]:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    x = LEFT + (plot_w * i / (k - 1) if k > 1 else plot_w / 2)
    y = TOP + plot_h * (1.0 - max(0.0, min(1.0, rate)))
    return x, y


def per_position_svg(series: Mapping[str, AcceptanceProfile], title: str = "") -> str:
    """An SVG line chart of each profile's per-position rates (with CI bands when present)."""
    drawn = {name: p for name, p in series.items() if p.per_position}
    if not drawn:
        raise InputError("no per-position rates to plot",
                         "the source carries no per-position counts (e.g. SGLang log lines)")
    k = max(len(p.per_position or []) for p in drawn.values())
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="28" font-size="15">{escape(title)}</text>',
    ]
    parts += _axes(k)
    for n, (name, p) in enumerate(drawn.items()):
        parts += _series(name, p, COLOURS[n % len(COLOURS)], k, n)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _axes(k: int) -> list[str]:
    out = []
    for tick in range(0, 11, 2):
        _, y = _xy(0, tick / 10, k)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{tick / 10:.1f}</text>')
    for i in range(k):
        x, _ = _xy(i, 0, k)
        out.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{i}</text>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 14}" text-anchor="middle">'
               "draft position</text>")
    out.append(f'<text transform="translate(18 {(TOP + HEIGHT - BOTTOM) / 2:.0f}) rotate(-90)" '
               'text-anchor="middle">acceptance rate (unconditional)</text>')
    return out


def _series(name: str, p: AcceptanceProfile, colour: str, k: int, n: int) -> list[str]:
    rates = p.per_position or []
    out = []
    band = [p.intervals.get(f"per_position[{i}]") for i in range(len(rates))]
    if all(iv is not None for iv in band) and band:
        upper = [_xy(i, iv.high, k) for i, iv in enumerate(band) if iv]
        lower = [_xy(i, iv.low, k) for i, iv in enumerate(band) if iv][::-1]
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in upper + lower)
        out.append(f'<polygon points="{pts}" fill="{colour}" fill-opacity="0.15" stroke="none"/>')
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (_xy(i, r, k) for i, r in enumerate(rates)))
    out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
    for i, r in enumerate(rates):
        x, y = _xy(i, r, k)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
                   f"<title>{escape(name)} position {i}: {r:.3f}</title></circle>")
    ly = TOP + 16 + 20 * n
    label = f"{name} (AL {p.mean_acceptance_length:.2f})" if p.mean_acceptance_length else name
    out.append(f'<line x1="{WIDTH - RIGHT + 12}" y1="{ly - 4}" x2="{WIDTH - RIGHT + 32}" '
               f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
    out.append(f'<text x="{WIDTH - RIGHT + 38}" y="{ly}">{escape(label)}</text>')
    return out


def write_plot(path: Path, series: Mapping[str, AcceptanceProfile], title: str = "") -> None:
    if path.suffix.lower() != ".svg":
        raise InputError(f"--plot writes SVG, not {path.suffix or 'a file without suffix'}",
                         "pass a path ending in .svg")
    try:
        path.write_text(per_position_svg(series, title))
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", "pick a writable path") from exc
