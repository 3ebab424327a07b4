"""Per-position acceptance curves (matplotlib), written as SVG or PNG by the file's suffix.

A cliff (Case A: 0.5, 0.25, 0) and a healthy decay (0.73, 0.52, 0.36) look alike in a table of
three numbers and nothing alike on a curve. Each series is drawn with its 95% interval band
when the profile has one; rates are unconditional (vLLM's convention), as the axis says.
matplotlib is imported only when a plot is drawn, so commands start fast.

    write_plot(Path("curve.svg"), {"measured": profile, "oracle": other}, title="lab · k=4")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import InputError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SUFFIXES = (".svg", ".png")
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def new_figure(width: float = 7.2, height: float = 4.0, ncols: int = 1, nrows: int = 1
               ) -> tuple[Figure, Any]:
    """A figure off-screen (Agg), text kept as text in SVG (searchable, selectable)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = "specdoctor"  # same input, same bytes
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), dpi=100, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


@dataclass(frozen=True)
class RateCurve:
    """Per-position rates as a source printed them, where its counts are not known (a vLLM
    window whose draft count the printed figures do not pin down): the curve, and the lowest
    and highest each position can be."""

    rates: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    label: str = "printed rates"


def draw_per_position(ax: Axes, series: Mapping[str, AcceptanceProfile | RateCurve],
                      title: str = "", colours: Mapping[str, str] | None = None) -> None:
    """Each profile's per-position rates, with its 95% band where it has intervals (a
    ``RateCurve``: its printed rates, with the band they allow)."""
    drawn = {name: p for name, p in series.items()
             if isinstance(p, RateCurve) and p.rates or
             isinstance(p, AcceptanceProfile) and p.per_position}
    if not drawn:
        raise InputError("no per-position rates to plot",
                         "the source prints no per-position rates (vLLM V0 and early V1 lines, "
                         "SGLang and llama.cpp lines without them)")
    k = max(len(p.rates if isinstance(p, RateCurve) else p.per_position or [])
            for p in drawn.values())
    for n, (name, p) in enumerate(drawn.items()):
        colour = (colours or {}).get(name) or COLOURS[n % len(COLOURS)]
        if isinstance(p, RateCurve):
            xs = list(range(len(p.rates)))
            if p.low != p.high:
                ax.fill_between(xs, p.low, p.high, color=colour, alpha=0.18, linewidth=0)
            ax.plot(xs, p.rates, marker="o", color=colour, linewidth=2,
                    label=f"{name} ({p.label})")
            continue
        rates = p.per_position or []
        xs = list(range(len(rates)))
        band = [p.intervals.get(f"per_position[{i}]") for i in xs]
        if band and all(iv is not None for iv in band):
            ax.fill_between(xs, [iv.low for iv in band if iv], [iv.high for iv in band if iv],
                            color=colour, alpha=0.18, linewidth=0)
        al = p.mean_acceptance_length
        label = f"{name} (AL {al:.2f})" if al else name
        ax.plot(xs, rates, marker="o", color=colour, linewidth=2, label=label)
    ax.set_xticks(range(k))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate (unconditional)")
    ax.grid(True, color="#dddddd")
    if title:
        ax.set_title(title, fontsize=11, loc="left")
    ax.legend(fontsize=8, loc="upper right")


def save(fig: Figure, path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"--plot writes SVG or PNG, not {path.suffix or 'a file without suffix'}",
                         "pass a path ending in .svg or .png")
    try:
        fig.savefig(path, format=suffix[1:], dpi=110)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", "pick a writable path") from exc


def write_plot(path: Path, series: Mapping[str, AcceptanceProfile | RateCurve],
               title: str = "") -> None:
    """The per-position curve of each series into ``path`` (.svg or .png)."""
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(f"--plot writes SVG or PNG, not {path.suffix or 'a file without suffix'}",
                         "pass a path ending in .svg or .png")
    fig, axes = new_figure()
    draw_per_position(axes[0][0], series, title)
    save(fig, path)


def per_position_svg(series: Mapping[str, AcceptanceProfile], title: str = "") -> str:
    """The same per-position chart as ``write_plot``, as an inline ``<svg>`` element (for HTML
    reports that must stay one self-contained file)."""
    import io

    fig, axes = new_figure()
    draw_per_position(axes[0][0], series, title)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]
