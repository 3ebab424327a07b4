"""The vocabulary map learned from a head's own proposals, on pairs recorded from a real run
(tests/fixtures/oracle/eagle3_slot_pairs.json says how): the trained head's served map is
cleared, a map regenerated from other data and a map dropped from the checkpoint are found."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specdoctor.oracle import slotmap
from specdoctor.oracle.slotmap import SlotPairs

FIXTURE = Path(__file__).parents[1] / "fixtures" / "oracle" / "eagle3_slot_pairs.json"


def _variant(name: str) -> tuple[list[SlotPairs], np.ndarray]:
    v = json.loads(FIXTURE.read_text())["variants"][name]
    pairs = [SlotPairs(p["index"], np.array(p["slots"], dtype=np.int64),
                       np.array(p["nexts"], dtype=np.int64)) for p in v["prompts"]]
    return pairs, np.array(v["served"], dtype=np.int64)


def test_the_trained_heads_own_map_is_cleared():
    pairs, served = _variant("healthy")
    h, _ = slotmap.held_out(pairs, served)
    assert h.positions > 400 and h.served / h.positions > 0.7
    assert not h.learned_better and h.rules_out, h.text()


@pytest.mark.parametrize("name", ["regenerated", "dropped"])
def test_a_map_that_sends_the_slots_elsewhere_is_found_on_held_out_prompts(name):
    pairs, served = _variant(name)
    h, learned = slotmap.held_out(pairs, served)
    assert h.learned_better and not h.rules_out, h.text()
    assert h.learned - h.served > 0.25 * h.positions
    # the map learned from every prompt sends the slots where the healthy head's map does,
    # wherever it changed one
    _, healthy = _variant("healthy")
    changed = learned != served
    assert changed.sum() > 20
    assert (learned[changed] == healthy[changed]).mean() > 0.9


def test_the_held_out_prompts_are_not_the_ones_learned_on():
    served = np.array([5, 9])
    pairs = [SlotPairs(0, np.array([0, 0]), np.array([5, 5])),      # learned on
             SlotPairs(1, np.array([1, 1, 1]), np.array([7, 7, 7]))]  # held out
    h, learned_all = slotmap.held_out(pairs, served)
    assert h.positions == 3 and h.better == 0 and h.learned == h.served == 0
    assert learned_all.tolist() == [5, 7]   # the map from every prompt, for the oracle run


def test_learning_keeps_the_served_target_of_slots_seen_too_rarely_or_without_a_majority():
    served = np.array([10, 11, 12])
    pairs = [SlotPairs(0, np.array([0, 1, 1, 2, 2, 2, 2]), np.array([5, 6, 6, 7, 8, 9, 12]))]
    learned = slotmap.learn(pairs, served)
    assert learned.tolist() == [10, 6, 12]   # slot 0 seen once; slot 2 has no majority


def test_sign_test_is_the_binomial_tail():
    assert slotmap.sign_test(0, 0) == 1.0
    assert slotmap.sign_test(3, 0) == pytest.approx(1 / 8)
    assert slotmap.sign_test(2, 2) == pytest.approx(11 / 16)
