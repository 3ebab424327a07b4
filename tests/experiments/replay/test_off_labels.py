"""Which measurements the replay takes again: those off their oracle, and those not shown
within 5% of it (figures from the clinic's first diagnosis of up-ngram-lookup-max-ignored, a
prompt-lookup proposer that ignored its maximum n-gram length: measured 1.755 vs oracle 1.817
accepted per draft, gap 95% [0.000, 0.142], which the comparison alone called equal)."""

from __future__ import annotations

from specdoctor.bench.measure import Measurement, MeasureParams
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context, Measured
from specdoctor.experiments.replay.experiment import off_labels

LOOKUP_MAX_IGNORED = rules.Gap(1.755, 1.817, 0.000, 0.142)
SELF_DRAFT = rules.Gap(4.000, 4.000, 0.000, 0.000)        # healthy-self, greedy
BELOW = rules.Gap(3.600, 4.000, 0.210, 0.590)             # up-draft-positions-ahead


def _ctx(tmp_path, g: rules.Gap) -> Context:
    ctx = Context(tmp_path, measured=Measured(greedy=Measurement("u", "m", MeasureParams())))
    ctx.oracle_gap = g
    return ctx


def test_a_gap_not_shown_within_five_percent_is_replayed(tmp_path):
    g = LOOKUP_MAX_IGNORED
    assert g.equal and not g.below and not g.bounded
    assert off_labels(_ctx(tmp_path, g)) == {"greedy": (0.0, 1.0)}


def test_a_gap_shown_within_five_percent_is_not(tmp_path):
    assert SELF_DRAFT.bounded
    assert off_labels(_ctx(tmp_path, SELF_DRAFT)) == {}
    assert rules.Gap(1.80, 1.817, -0.05, 0.08).bounded          # both bounds inside 0.091
    assert not rules.Gap(1.80, 1.817, -0.10, 0.08).bounded      # could be above by more
    assert not rules.Gap(1.80, 1.817, None, None).bounded       # no interval: nothing shown


def test_a_gap_below_is_replayed(tmp_path):
    assert BELOW.below and not BELOW.bounded
    assert off_labels(_ctx(tmp_path, BELOW)) == {"greedy": (0.0, 1.0)}
