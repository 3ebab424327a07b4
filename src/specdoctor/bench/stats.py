"""Pure figures of a benchmark cell: latency percentiles, throughput, and whether two
configurations really differ.

Conventions (those of ``vllm bench serve`` and AIPerf, so figures compare):
- TTFT: send → first token-bearing event.
- ITL: the gaps between token-bearing events (under speculation one event may carry several
  tokens, so ITL is per event, as the engine emits them).
- TPOT: per request, (latency − TTFT) / (output tokens − 1).
- aggregate tok/s: all output tokens / the cell's wall time; per-stream tok/s: each request's
  output tokens / its own latency.

"Not significant": two values are only called different when their spreads do not overlap —
the min..max over ``--repeat`` runs, or, with one run, the 95% bootstrap interval of the mean
per-stream tok/s over requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PCTS = (50, 90, 99)


def percentiles(xs: Sequence[float]) -> dict[str, float] | None:
    if not xs:
        return None
    a = np.asarray(xs, dtype=float)
    return {f"p{p}": float(np.percentile(a, p)) for p in PCTS} | {"mean": float(a.mean())}


def tpot(latency_s: float, ttft_s: float, tokens: int) -> float | None:
    return (latency_s - ttft_s) / (tokens - 1) if tokens > 1 else None


def mean_interval(xs: Sequence[float], resamples: int = 2000, seed: int = 0
                  ) -> tuple[float, float] | None:
    """95% bootstrap interval of the mean (None below two values)."""
    if len(xs) < 2:
        return None
    a = np.asarray(xs, dtype=float)
    rng = np.random.default_rng(seed)
    means = a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


@dataclass(frozen=True)
class Spread:
    """A value with the range it moved in: over repeats, or a bootstrap interval."""

    value: float
    low: float
    high: float
    basis: str  # "repeats" | "requests" | "none"

    def to_json(self) -> dict[str, object]:
        return {"value": round(self.value, 4), "low": round(self.low, 4),
                "high": round(self.high, 4), "basis": self.basis}


def spread(repeat_values: Sequence[float], stream_values: Sequence[float] = ()) -> Spread | None:
    """Median and min..max over repeats; with one repeat, the mean per-stream interval scaled
    to the single value (the relative uncertainty of one run)."""
    vals = [v for v in repeat_values if v is not None]
    if not vals:
        return None
    if len(vals) >= 2:
        return Spread(float(np.median(vals)), min(vals), max(vals), "repeats")
    v = vals[0]
    iv = mean_interval(stream_values)
    if iv is None or not stream_values:
        return Spread(v, v, v, "none")
    m = float(np.mean(stream_values))
    return Spread(v, v * iv[0] / m, v * iv[1] / m, "requests")


def significant(a: Spread, b: Spread) -> bool:
    """True when the two ranges do not overlap (and there is a range at all)."""
    if a.basis == "none" or b.basis == "none":
        return False
    return a.high < b.low or b.high < a.low


def compare_text(name_a: str, a: Spread, name_b: str, b: Spread, unit: str = "tok/s") -> str:
    """One plain sentence: which is faster, or that they are the same within the spread."""
    diff = (a.value - b.value) / b.value * 100 if b.value else float("inf")
    if not significant(a, b):
        why = "no spread measured" if "none" in (a.basis, b.basis) else "within the spread"
        return (f"{name_a} ≈ {name_b}: {a.value:.1f} vs {b.value:.1f} {unit} "
                f"({diff:+.1f}%, not significant: {why})")
    faster, slower = (name_a, name_b) if a.value > b.value else (name_b, name_a)
    return f"{faster} beats {slower}: {a.value:.1f} vs {b.value:.1f} {unit} ({diff:+.1f}%)"


def accepted_histogram(blocks: Sequence[dict]) -> list[int] | None:
    """Steps that accepted exactly j drafts, summed over requests' spec-decode metrics."""
    hists = [b.get("acceptance_histogram") for b in blocks if isinstance(b, dict)]
    hists = [h for h in hists if isinstance(h, list)]
    if not hists:
        return None
    n = max(len(h) for h in hists)
    return [sum(int(h[j]) for h in hists if j < len(h)) for j in range(n)]
