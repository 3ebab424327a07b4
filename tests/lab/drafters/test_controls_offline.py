"""Every control, through its reference forward and the greedy step walk, gives its designed
profile — without a server. (The live module checks the same designs on real vLLM.)"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specdoctor.bench.prompts import take  # noqa: E402
from specdoctor.lab import drafters, faults  # noqa: E402
from specdoctor.lab.drafters import cycle, offline, targets  # noqa: E402

CASES = [(m, n) for m, names in drafters.CONTROLS.items() for n in names]


@pytest.mark.parametrize(("method", "name"), CASES, ids=[f"{m}-{n}" for m, n in CASES])
def test_control_gives_its_designed_profile(method, name):
    target, draft = drafters.module(method).control(name)
    k, max_tokens = 4, 24
    c = offline.predict(method, target, draft, take("code", 3), k, max_tokens)
    assert c.per_position == drafters.control(method, name).designed(k)
    run = drafters.control(method, name).designed(k).count(1.0)
    per_request = len(offline.walk([run] * 99, 0, k, max_tokens))
    assert c.drafts == 3 * per_request


def test_the_control_target_walks_its_cycle_whatever_the_prompt():
    target = cycle.target("llama")
    for d in targets.prompt_data(target, take("code", 2) + take("essay", 1), 12):
        gen = d.ids[0, d.prompt_len:].tolist()
        assert gen[0] == cycle.next_token(d.ids[0, d.prompt_len - 1].item())
        assert all(b == cycle.next_token(a) for a, b in zip(gen, gen[1:]))
        assert set(gen) <= set(cycle.CYCLE)


def test_a_d2t_off_by_one_on_a_right_drafter_accepts_nothing():
    served = faults.serve("eagle3", control="perfect", fault="eagle3-d2t-off-by-one")
    c = offline.predict("eagle3", served.target, served.draft, take("code", 2), 3, 16)
    assert c.per_position == [0.0, 0.0, 0.0] and c.drafts == 2 * 15


def test_causal_serving_leaves_a_block_that_only_reads_its_first_token_unchanged():
    healthy = drafters.serve("dflash", control="pos0")
    sick = faults.serve("dflash", control="pos0", fault="dflash-causal")
    a, b = (offline.predict("dflash", s.target, s.draft, take("code", 2), 3, 16).per_position
            for s in (healthy, sick))
    assert a == b == [1.0, 0.0, 0.0]
