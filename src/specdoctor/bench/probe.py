"""How fast this machine runs a fixed piece of work right now.

Two servers timed one after the other (speculation on, then off) share the machine with
whatever else runs on it; when that changes between the two, their ratio moves with it. A
fixed single-thread workload timed before and after each side's passes measures how much CPU
the machine gives right then: ``drift`` is the largest relative change between those probes,
the share by which the two sides' conditions may differ.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

WORK = 200_000     # loop iterations per run: about 10-20 ms on one core
REPEATS = 5


def _work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def cpu_speed(repeats: int = REPEATS, work: int = WORK) -> float:
    """Runs of the fixed workload per second (the median of ``repeats``)."""
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        _work(work)
        times.append(time.perf_counter() - t0)
    return 1.0 / max(statistics.median(times), 1e-9)


def drift(speeds: Sequence[float]) -> float:
    """The largest relative change between probes, max / min - 1 (0 with fewer than two)
    (pure)."""
    good = [s for s in speeds if s > 0]
    if len(good) < 2:
        return 0.0
    return max(good) / min(good) - 1.0
