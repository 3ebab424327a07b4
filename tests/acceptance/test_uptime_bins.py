"""UptimeBins: the windows drift reads, in bounded memory, drift unchanged where it matters."""

import random

import pytest

from specdoctor.acceptance.compare import MIN_DRIFT_WINDOWS, UptimeBins, drift
from specdoctor.acceptance.profile import AcceptanceProfile


def _window(drafts: int, accepted: int, k: int = 3) -> AcceptanceProfile:
    return AcceptanceProfile(drafts=drafts, draft_tokens=drafts * k, accepted_tokens=accepted,
                             accepted_per_position=None, k=k)


def _windows(n: int, seed: int = 0, fall: float = 0.0) -> list[AcceptanceProfile]:
    """n windows of 20-60 drafts, accepted per draft 1.5 falling linearly by ``fall``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        d = rng.randint(20, 60)
        rate = 1.5 * (1 - fall * i / max(n - 1, 1))
        out.append(_window(d, int(round(d * rate * rng.uniform(0.9, 1.1)))))
    return out


def _binned(ws: list[AcceptanceProfile], cap: int) -> UptimeBins:
    bins = UptimeBins(cap)
    for w in ws:
        bins.add(w)
    return bins


@pytest.mark.parametrize("n", [MIN_DRIFT_WINDOWS - 1, MIN_DRIFT_WINDOWS, 50, 64])
def test_up_to_the_cap_the_bins_are_the_windows_and_drift_is_the_same(n):
    ws = _windows(n, seed=n)
    bins = _binned(ws, cap=64)
    assert bins.profiles() == tuple(ws)
    assert drift(bins.profiles()) == drift(ws)


def test_windows_drift_does_not_read_are_not_kept():
    rate_only = AcceptanceProfile(drafts=None, draft_tokens=None, accepted_tokens=None,
                                  accepted_per_position=None, k=3,
                                  reported_mean_acceptance_length=2.0, count_weighted=False)
    idle = _window(0, 0)
    bins = _binned([rate_only, idle, _window(10, 12)], cap=8)
    assert bins.windows == 1 and len(bins.profiles()) == 1


def test_past_the_cap_memory_is_bounded_and_the_counts_are_all_there():
    ws = _windows(10_000, seed=1)
    bins = _binned(ws, cap=16)
    prof = bins.profiles()
    assert 16 <= len(prof) <= 2 * 16
    assert bins.windows == 10_000
    assert sum(p.drafts for p in prof) == sum(w.drafts for w in ws)
    assert sum(p.accepted_tokens for p in prof) == sum(w.accepted_tokens for w in ws)


@pytest.mark.parametrize("fall", [0.0, 0.3])
def test_past_the_cap_drift_over_bins_is_drift_over_windows_within_a_bin(fall):
    ws = _windows(5_000, seed=2, fall=fall)
    exact = drift(ws)
    binned = drift(_binned(ws, cap=32).profiles())
    assert exact is not None and binned is not None
    # the thirds end on a bin's edge: at most one bin of 5000 / 32..64 windows off
    assert binned == pytest.approx(exact, abs=0.02)
    falls = binned[1] < 0.8 * binned[0]
    assert falls == (fall > 0)


def test_a_cap_below_what_drift_reads_is_refused():
    with pytest.raises(ValueError):
        UptimeBins(MIN_DRIFT_WINDOWS - 1)
