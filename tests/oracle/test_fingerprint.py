"""The vocabulary fingerprint on proposals recorded from a real run
(tests/fixtures/oracle/eagle3_slot_pairs.json says how): the shape of the map learned from a
drafter's misses — none for the trained head as served, piecewise offsets for the head served
without its map, a swap where two of its slots were exchanged — and the pairs read off an
oracle run's steps."""

from __future__ import annotations

import numpy as np

from specdoctor.oracle import fingerprint, slotmap
from specdoctor.oracle.simulate import RequestTrace, Step
from tests.oracle.test_slotmap import _variant


def test_the_trained_heads_misses_follow_no_map():
    pairs, served = _variant("healthy")
    _, learned = slotmap.held_out(pairs, served)
    form = fingerprint.shape(learned, served)
    assert not form.systematic, form.text()


def test_a_head_served_without_its_map_shows_offset_runs():
    """Zero offsets served where the trained map skips ids: the learned map moves whole runs of
    slots by the same offset."""
    pairs, served = _variant("dropped")
    _, learned = slotmap.held_out(pairs, served)
    form = fingerprint.shape(learned, served)
    assert form.systematic
    runs = [r for r in form.offsets if r[1] > r[0]]
    assert runs and all(o > 0 for _, _, o in runs), form.text()
    assert "offset runs" in form.text()


def test_two_slots_exchanged_are_found_as_a_swap():
    pairs, healthy = _variant("healthy")
    slots = np.concatenate([p.slots for p in pairs])
    a, b = (int(x) for x in np.argsort(np.bincount(slots))[-2:])
    served = healthy.copy()
    served[a], served[b] = healthy[b], healthy[a]
    h, learned = slotmap.held_out(pairs, served)
    assert h.learned_better, h.text()
    form = fingerprint.shape(learned, served)
    assert (min(a, b), max(a, b)) in form.swaps, form.text()
    assert form.systematic


def test_a_three_cycle_is_a_cycle_and_many_to_one_is_named():
    served = np.arange(10)
    learned = served.copy()
    learned[[2, 5, 7]] = [5, 7, 2]       # 2 stands for 5, 5 for 7, 7 for 2
    form = fingerprint.shape(learned, served)
    assert form.cycles == ((2, 5, 7),) and not form.swaps
    learned = served.copy()
    learned[[3, 4]] = [9, 9]
    form = fingerprint.shape(learned, served)
    assert form.many_to_one == {9: (3, 4)} and form.systematic
    assert not fingerprint.shape(served, served).moved


def test_a_lone_moved_id_is_not_systematic():
    served = np.arange(10)
    learned = served.copy()
    learned[4] = 8
    form = fingerprint.shape(learned, served)
    assert form.moved == {4: 8} and not form.systematic


def test_pairs_are_each_steps_first_draft_beside_the_targets_token():
    steps = [Step(1, 2, [5, 6], [1.0, 0.0], 1, [5, 9]), Step(3, 2, [7, 1], [0.0, 0.0], 0, [8])]
    t = RequestTrace(3, 0, [1, 2], [4, 5, 9, 8], steps)
    (p,) = fingerprint.pairs_from_traces([t])
    assert p.prompt_index == 3
    assert p.slots.tolist() == [5, 7] and p.nexts.tolist() == [5, 8]


def test_a_learned_map_is_made_one_to_one_keeping_the_id_that_maps_to_itself() -> None:
    from specdoctor.oracle.fingerprint import one_to_one

    # a block 3..4 shifted by one: its last id lands on 5, which maps to itself and keeps it
    assert one_to_one([0, 1, 2, 4, 5, 5, 6]) == ([0, 1, 2, 4, -1, 5, 6], [4])
    # a weak drafter's confusion (it says 1 where the target says 2): no map at all
    assert one_to_one([0, 1, 1, 3]) == ([0, 1, -1, 3], [2])
    # a permutation is left as it is; unmapped ids stay unmapped
    assert one_to_one([1, 0, -1, 2]) == ([1, 0, -1, 2], [])
    # two moved ids on one target and no identity: the lower keeps it
    assert one_to_one([5, 5, 2, 3, 4, 0]) == ([5, -1, 2, 3, 4, 0], [1])
