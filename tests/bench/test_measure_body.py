"""What measure sends: each request its own seed, so sampled requests are independent units."""

from __future__ import annotations

from specdoctor.bench.measure import MeasureParams, request_body


def test_each_request_gets_the_base_seed_plus_its_index():
    p = MeasureParams(temperature=1.0, top_p=0.95, seed=100)
    bodies = [request_body("lab", "x", p, i) for i in range(4)]
    assert [b["seed"] for b in bodies] == [100, 101, 102, 103]
    assert all(b["temperature"] == 1.0 and b["top_p"] == 0.95 for b in bodies)
    assert bodies[0]["ignore_eos"] is True and bodies[0]["max_tokens"] == 64


def test_no_seed_sends_none_and_greedy_is_the_default():
    b = request_body("lab", "x", MeasureParams(seed=None), 3)
    assert "seed" not in b
    assert b["temperature"] == 0.0 and b["top_p"] == 1.0


def test_the_old_scheme_one_seed_for_all_stays_expressible():
    p = MeasureParams(temperature=1.0, seed=0, seed_per_request=False)
    assert {request_body("lab", "x", p, i)["seed"] for i in range(3)} == {0}
