"""The diagnosis HTML draws before/after curves inline wherever an experiment recorded two."""

from types import SimpleNamespace

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.diagnose.report import html_page


def test_an_experiment_with_before_and_after_curves_is_drawn_inline():
    before = AcceptanceProfile(10, 30, 3, (2, 1, 0), 3)
    after = AcceptanceProfile(10, 30, 27, (10, 9, 8), 3)
    one_curve = SimpleNamespace(experiment="oracle-greedy", curves={"measured": before})
    recovered = SimpleNamespace(experiment="relaunch-counterfactual",
                                curves={"before": before, "after: rope_theta=10000": after})
    d = SimpleNamespace(ledger=SimpleNamespace(results=[one_curve, recovered]))
    page = html_page(d, "lab", "# diagnosis")
    assert page.count("<svg") == 1  # only the experiment with a before and an after
    assert "<h3>relaunch-counterfactual</h3><svg" in page
    assert "after: rope_theta=10000 (AL 3.70)" in page
