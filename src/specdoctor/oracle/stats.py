"""Bootstrap intervals for ratios of per-request sums, alone or paired (oracle vs measured), and
the exact binomial tails the count tests read.

``acceptance.bootstrap`` works on AcceptanceProfiles with integer counters; the oracle's
expected counts are fractional (sums of probabilities), and a comparison needs the interval of
a *difference* of two ratios resampled together by prompt. Both are a few lines of numpy on
arrays of shape (units, columns): column 0 the drafts, then one column per position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000


@dataclass(frozen=True)
class RatioCI:
    value: float | None
    low: float | None
    high: float | None

    def to_json(self) -> list[float | None]:
        return [_r(self.value), _r(self.low), _r(self.high)]


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _weights(n: int, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def _ci(point: float, samples: np.ndarray) -> RatioCI:
    finite = samples[np.isfinite(samples)]
    if not np.isfinite(point):
        return RatioCI(None, None, None)
    if finite.size == 0:
        return RatioCI(float(point), None, None)
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return RatioCI(float(point), float(lo), float(hi))


def position_rates(units: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
                   ) -> list[RatioCI]:
    """Per-position rate sum(col i+1) / sum(col 0), with a bootstrap over rows (units)."""
    units = np.asarray(units, dtype=np.float64)
    total = units.sum(axis=0)
    if units.shape[0] < 2:
        return [RatioCI(float(_ratio(total[i], total[0])), None, None)
                for i in range(1, units.shape[1])]
    sums = _weights(units.shape[0], resamples, seed) @ units
    return [_ci(float(_ratio(total[i], total[0])), _ratio(sums[:, i], sums[:, 0]))
            for i in range(1, units.shape[1])]


def paired_gaps(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
                ) -> list[RatioCI]:
    """Per-position (rate of a) - (rate of b), resampling the same rows of both together."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired units need the same shape, got {a.shape} and {b.shape}")
    ta, tb = a.sum(axis=0), b.sum(axis=0)
    points = [float(_ratio(ta[i], ta[0]) - _ratio(tb[i], tb[0])) for i in range(1, a.shape[1])]
    if a.shape[0] < 2:
        return [RatioCI(p, None, None) for p in points]
    w = _weights(a.shape[0], resamples, seed)
    sa, sb = w @ a, w @ b
    return [_ci(points[i - 1], _ratio(sa[:, i], sa[:, 0]) - _ratio(sb[:, i], sb[:, 0]))
            for i in range(1, a.shape[1])]


def binomial_tails(observed: int, trials: int, p: float) -> tuple[float, float]:
    """(P(X <= observed), P(X >= observed)) for X ~ Binomial(trials, p), exact (pure). ``p``
    at 0 or 1 gives the degenerate distribution."""
    import math

    if p <= 0.0 or p >= 1.0:
        at = 0 if p <= 0.0 else trials
        return (1.0 if observed >= at else 0.0), (1.0 if observed <= at else 0.0)
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(trials + 1)

    def pmf(i: int) -> float:
        return math.exp(head - math.lgamma(i + 1) - math.lgamma(trials - i + 1)
                        + i * log_p + (trials - i) * log_q)

    lo, hi = max(observed, 0), min(observed, trials)
    below = sum(pmf(i) for i in range(0, hi + 1)) if observed >= 0 else 0.0
    above = sum(pmf(i) for i in range(lo, trials + 1)) if observed <= trials else 0.0
    return below, above
