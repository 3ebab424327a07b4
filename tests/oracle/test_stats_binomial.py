"""The exact binomial tails the count tests read (``oracle.stats.binomial_tails``)."""

from __future__ import annotations

from math import comb

import pytest

from specdoctor.oracle.stats import binomial_tails


@pytest.mark.parametrize(("observed", "trials", "p"), [(3, 10, 0.3), (0, 5, 0.1), (7, 7, 0.9),
                                                       (12, 40, 0.5)])
def test_the_tails_are_the_sums_of_the_binomial_terms(observed, trials, p):
    terms = [comb(trials, i) * p ** i * (1 - p) ** (trials - i) for i in range(trials + 1)]
    below, above = binomial_tails(observed, trials, p)
    assert below == pytest.approx(sum(terms[:observed + 1]), rel=1e-9)
    assert above == pytest.approx(sum(terms[observed:]), rel=1e-9)


def test_a_degenerate_rate_puts_every_outcome_at_one_count():
    assert binomial_tails(10, 10, 1.0) == (1.0, 1.0)
    assert binomial_tails(9, 10, 1.0) == (0.0, 1.0)     # fewer than every trial: impossible
    assert binomial_tails(0, 10, 0.0) == (1.0, 1.0)
    assert binomial_tails(1, 10, 0.0) == (1.0, 0.0)
