"""95% confidence intervals by bootstrap over independent units (requests or log windows).

Drafts inside one request are not independent (a hard passage lowers every draft in it), so a
binomial interval on pooled counts is too narrow. Instead whole units are resampled with
replacement and each ratio is recomputed from the resampled counter sums.

Many units (a day of log windows) are first merged into at most ``max_blocks`` consecutive
blocks: a block bootstrap, which keeps neighbouring windows together and is, if anything,
more conservative.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specdoctor.acceptance.profile import AcceptanceProfile, Interval

MIN_UNITS = 2


def bootstrap_intervals(
    units: Sequence[AcceptanceProfile],
    *,
    resamples: int = 2000,
    max_blocks: int = 2000,
    seed: int = 0,
) -> dict[str, Interval]:
    """Intervals for mean_acceptance_length, acceptance_rate and each per-position rate.

    Returns an empty dict when the data allows no interval: fewer than two units, or units
    without the counts a figure needs.
    """
    usable = [u for u in units if u.count_weighted and u.drafts is not None]
    if len(usable) < MIN_UNITS or len(usable) != len(units):
        return {}
    width = max(len(u.accepted_per_position or ()) for u in usable)
    has_pos = all(u.accepted_per_position is not None for u in usable)
    has_tokens = all(u.draft_tokens is not None and u.accepted_tokens is not None for u in usable)
    if not has_tokens:
        return {}
    rows = np.zeros((len(usable), 3 + width), dtype=np.float64)
    for r, u in enumerate(usable):
        rows[r, 0] = u.drafts or 0
        rows[r, 1] = u.draft_tokens or 0
        rows[r, 2] = u.accepted_tokens or 0
        for i, a in enumerate(u.accepted_per_position or ()):
            rows[r, 3 + i] = a
    rows = _blocks(rows, max_blocks)
    n = rows.shape[0]
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)
    sums = weights @ rows  # resamples x columns
    drafts, draft_tokens, accepted = sums[:, 0], sums[:, 1], sums[:, 2]
    out: dict[str, Interval] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        _put(out, "mean_acceptance_length", 1.0 + accepted / drafts)
        _put(out, "accepted_per_draft", accepted / drafts)
        _put(out, "acceptance_rate", accepted / draft_tokens)
        if has_pos:
            for i in range(width):
                _put(out, f"per_position[{i}]", sums[:, 3 + i] / drafts)
    return out


def _blocks(rows: np.ndarray, max_blocks: int) -> np.ndarray:
    n = rows.shape[0]
    if n <= max_blocks:
        return rows
    edges = np.linspace(0, n, max_blocks + 1).astype(int)
    return np.add.reduceat(rows, edges[:-1], axis=0)


def _put(out: dict[str, Interval], name: str, samples: np.ndarray) -> None:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return
    low, high = np.percentile(finite, [2.5, 97.5])
    out[name] = Interval(float(low), float(high), "bootstrap")
