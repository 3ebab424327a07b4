"""A 95% interval that reaches the reference's band counts as within it, on a recorded run.

The recorded healthy MTP drafter (tests/diagnose/fixtures/recorded_profiles.json, k=2: 349 and
204 accepted of 462 drafts) sits just under the band of the published MTP figure at position 1
(0.442 against a floor of 0.62 x 0.75 - 0.02 = 0.445), and under a user's mean-only reference
of the same figure on the total (1.197 against 1.38 x 0.90 - 0.02 = 1.222); its intervals
(position 1 up to 0.522, the total up to 1.346) reach both bands. A point estimate alone would
call this healthy drafter low.
"""

from __future__ import annotations

import json

from specdoctor.diagnose.references import Reference, load_user_reference
from specdoctor.diagnose.signature import Facts, classify, shape, within
from tests.diagnose.recorded import profile

# vLLM PR #48892's MTP GSM8K figure (references.PUBLISHED "mtp-8layer-gsm8k"), its first two
# positions, at the 25% tolerance published figures get.
MTP_FIRST_TWO = (0.76, 0.62)


def test_the_recorded_mtp_run_is_under_the_band_on_its_point_estimates():
    p = profile("healthy:mtp")
    assert (p.drafts, p.accepted_per_position) == (462, (349, 204))
    assert not within(p.per_position[1], MTP_FIRST_TWO[1], 0.25)
    assert within(p.per_position[1], MTP_FIRST_TWO[1], 0.25,
                  p.intervals["per_position[1]"].high)


def test_per_position_an_interval_reaching_the_band_is_healthy():
    ref = Reference("mtp-8layer-gsm8k", "published", MTP_FIRST_TWO, tolerance=0.25)
    cls, evidence, _ = shape(profile("healthy:mtp"), ref)
    assert cls == "healthy", evidence
    assert classify(Facts(profile("healthy:mtp"), ref, method="mtp")).cls == "healthy"


def test_on_the_total_an_interval_reaching_the_band_is_healthy(tmp_path):
    f = tmp_path / "mtp-mean.json"
    f.write_text(json.dumps({"mean_acceptance_length": 1 + sum(MTP_FIRST_TWO),
                             "bonus_counted": True, "k": 2}))
    ref = load_user_reference(f)
    assert not ref.shape_stated and round(ref.accepted_per_draft, 6) == 1.38
    p = profile("healthy:mtp")
    assert p.accepted_per_draft < ref.accepted_per_draft * 0.9 - 0.02
    cls, evidence, _ = shape(p, ref)
    assert cls == "healthy", evidence
    assert "1.20 accepted per draft" in evidence and "within 10%" in evidence
