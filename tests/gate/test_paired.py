"""The paired test of the gate (``gate.paired``) on recorded measurements of the lab
(tests/fixtures/gate/, see its RECORDED.md): which prompt and seed each request had, how
requests become pairs, the sign-flip p-value, the fallback to the unpaired test, and the
smallest drop each figure would be caught at.

The checks that the pairing matters: a drop injected evenly into a recorded candidate is
called by the paired test and not by the unpaired one, and pairing each baseline prompt with
another prompt of the candidate (mismatched prompts) loses it.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench import matrix, summary
from specdoctor.gate import baseline as bl
from specdoctor.gate import paired
from specdoctor.gate.compare import (
    PAIRED, UNPAIRED, CellSample, acceptance_estimates, cell_pairs, compare, mover_p,
)
from specdoctor.store.bench import CellRow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gate"


def demo(name: str) -> bl.Baseline:
    return bl.load_file(FIXTURES / f"demo-{name}.json")


@lru_cache(maxsize=1)
def self_gates() -> list[bl.Baseline]:
    doc = json.loads((FIXTURES / "self-gates.json").read_text())
    return [bl.from_json(d, f"measurement {i}") for i, d in enumerate(doc["measurements"])]


def cell(b: bl.Baseline, name: str) -> CellSample:
    return next(c.sample for c in b.cells if c.sample.cell == name)


def scaled(units: tuple[AcceptanceProfile, ...], f: float) -> tuple[AcceptanceProfile, ...]:
    """Each request's accepted counts times f (rounded down), drafts unchanged."""
    out = []
    for u in units:
        pos = tuple(int(a * f) for a in u.accepted_per_position or ())
        out.append(AcceptanceProfile(u.drafts, u.draft_tokens, sum(pos), pos, u.k))
    return tuple(out)


# ---- which prompt and seed -----------------------------------------------------------------

def test_keys_of_a_recorded_file_are_recovered_from_its_prompts_and_seeds():
    b, c = demo("baseline"), demo("same")
    code = cell(b, "code/greedy/c4").keys
    assert code is not None and len(code) == 16
    assert [k.slot for k in code] == list(range(16))
    assert {k.seed for k in code} == {None}  # greedy: the seed changes nothing
    convs = matrix.conversations(b.matrix, "code")
    assert [k.prompt for k in code] == [paired.prompt_digest(x) for x in convs]
    sampled = cell(c, "essay/official/c4").keys
    assert sampled is not None
    assert [k.seed for k in sampled] == [c.matrix.seed + i for i in range(16)]  # 1000 + i
    # 8 essay prompts sent 16 times: request i and i + 8 share the prompt
    assert [k.prompt for k in sampled[:8]] == [k.prompt for k in sampled[8:]]


def test_a_repeated_greedy_prompt_is_one_unit_a_sampled_one_two():
    b, c = demo("baseline"), demo("same")
    greedy, _ = cell_pairs(cell(b, "essay/greedy/c4"), cell(c, "essay/greedy/c4"))
    sampled, _ = cell_pairs(cell(b, "essay/official/c4"), cell(c, "essay/official/c4"))
    assert greedy is not None and greedy.n == 8
    assert sampled is not None and sampled.n == 16 and not sampled.same_seeds
    replay, _ = cell_pairs(cell(b, "essay/official/c4"), cell(b, "essay/official/c4"))
    assert replay is not None and replay.same_seeds


def test_keys_are_written_read_back_and_checked(tmp_path: Path):
    b = demo("same")
    path = tmp_path / "b.json"
    bl.write_file(b, path)
    doc = json.loads(path.read_text())
    assert all(len(c["request_keys"]) == len(c["requests"]) for c in doc["cells"])
    assert [c.sample.keys for c in bl.load_file(path).cells] == [c.sample.keys for c in b.cells]
    doc["cells"][0]["request_keys"] = doc["cells"][0]["request_keys"][:-1]
    with pytest.raises(Exception, match=r"cells\[0\]\.request_keys is not a list of 16 keys"):
        bl.from_json(doc)


def _stored_cell(s: CellSample, config: str, order: list[int]) -> CellRow:
    """A recorded cell's requests in the bench store's per-request layout (index, error and
    the response's spec-decode block), in the given order."""
    assert s.units is not None and s.keys is not None
    reqs = []
    for i in order:
        u, key = s.units[i], s.keys[i]
        pos = list(u.accepted_per_position or ())
        hist = [u.drafts - pos[0]] + [a - b for a, b in zip(pos, pos[1:] + [0])]
        reqs.append({"index": key.slot, "error": None,
                     "spec": {"num_spec_steps": u.drafts, "num_draft_tokens": u.draft_tokens,
                              "num_accepted_draft_tokens": u.accepted_tokens,
                              "acceptance_histogram": hist}})
    suite, sampling, c = s.cell.split("/")
    return CellRow(s.cell, config, suite, sampling, int(c[1:]), 0, "ok", None,
                   {"cell": s.cell, "requests": reqs, "requests_ok": len(reqs)})


def test_keys_come_from_the_stored_per_request_records():
    c = demo("same")
    order = [5, 3, 0, 1, 2, 4, 6, 7, 15, 14, 13, 12, 11, 10, 9, 8]  # not in index order
    rows = [_stored_cell(cell(c, name), "lab", order)
            for name in ("code/official/c4", "essay/greedy/c4")]
    keyed = bl.request_keys(rows, c.matrix)
    for row in rows:
        want = cell(c, row.key)
        got = keyed[("lab", row.key)]
        assert [k for k, _ in got] == [want.keys[i] for i in order]  # type: ignore[index]
        assert [u for _, u in got] == [want.units[i] for i in order]  # type: ignore[index]
    # the gate takes them where the bench summary's units are the same requests
    srows = summary.rows(rows, [{"label": "lab"}])
    samples = dict((s.cell, s) for _, s in bl.cell_samples(srows, "lab", keyed))
    assert samples["code/official/c4"].keys == tuple(cell(c, "code/official/c4").keys[i]
                                                     for i in order)  # type: ignore[index]
    other = {k: v[:-1] for k, v in keyed.items()}  # one request short: not the same requests
    assert all(s.keys is None for _, s in bl.cell_samples(srows, "lab", other))


# ---- the test ------------------------------------------------------------------------------

def test_the_p_value_is_the_share_of_swap_patterns_as_far_from_zero():
    """The enumeration by doubling against a plain loop over every pattern, on 10 recorded
    pairs of a sampled cell of two runs of one server."""
    b, c = cell(demo("baseline"), "code/official/c4"), cell(demo("same"), "code/official/c4")
    pairs, _ = cell_pairs(b, c)
    assert pairs is not None
    small = paired.Pairs(pairs.base[:10], pairs.cand[:10], False)

    def diff(base: list, cand: list) -> float:
        return (sum(r[1] for r in cand) / sum(r[0] for r in cand)
                - sum(r[1] for r in base) / sum(r[0] for r in base))

    observed = diff(list(small.base), list(small.cand))
    far = 0
    for swaps in itertools.product([False, True], repeat=10):
        bs = [cr if s else br for br, cr, s in zip(small.base, small.cand, swaps)]
        cs = [br if s else cr for br, cr, s in zip(small.base, small.cand, swaps)]
        far += abs(diff(bs, cs)) >= abs(observed) - 1e-12
    assert paired.sign_flip_p(small, "mean_acceptance_length") == pytest.approx(far / 2 ** 10)
    assert 0 < far < 2 ** 10


def test_a_replayed_stream_is_no_difference():
    b = cell(demo("baseline"), "code/greedy/c4")
    pairs, _ = cell_pairs(b, b)
    assert pairs is not None and paired.sign_flip_p(pairs, "mean_acceptance_length") == 1.0


def test_an_even_drop_the_unpaired_test_misses_is_called_paired():
    """The greedy code cell of one server, its candidate's accepted counts lowered by 15% in
    every request: the prompts vary a lot (1.73 [1.47, 2.07]), every prompt drops. The
    unpaired test cannot see it past the prompt spread; paired, all 16 prompts fall."""
    b = cell(demo("baseline"), "code/greedy/c4")
    c = replace(cell(demo("same"), "code/greedy/c4"), units=scaled(b.units or (), 0.85))
    eb, ec = acceptance_estimates(b), acceptance_estimates(c)
    fig = "mean_acceptance_length"
    assert ec[fig].value < eb[fig].value * 0.95  # a drop beyond the allowed 5%
    assert mover_p(eb[fig], ec[fig]) > 0.3
    pairs, _ = cell_pairs(b, c)
    assert pairs is not None and pairs.n == 16
    assert paired.sign_flip_p(pairs, fig) == pytest.approx(2 / 2 ** 16)
    cmp = compare([b], [c])
    t = next(t for t in cmp.tests if t.figure == fig)
    assert t.method.name == PAIRED and t.outcome == "regressed"
    # the same candidate with its prompts mismatched (each request keyed as the next prompt's)
    keys = c.keys or ()
    shifted = replace(c, keys=tuple(replace(keys[(i + 1) % len(keys)]) for i in range(len(keys))))
    wrong, _ = cell_pairs(b, shifted)
    assert wrong is not None and wrong.n == 16
    assert paired.sign_flip_p(wrong, fig) > 0.05
    assert compare([b], [shifted]).passed


def test_no_keys_or_too_few_prompts_fall_back_to_the_unpaired_test_and_say_why():
    b, c = demo("baseline"), demo("same")
    cmp = compare(b.samples(), c.samples())
    methods = {(t.cell, t.method.name) for t in cmp.tested}
    assert ("code/official/c4", PAIRED) in methods
    # 8 essay prompts greedy: 8 units, smallest p 2/2^8 above Holm's strictest 0.05/11
    essay = [t for t in cmp.tested if t.cell == "essay/greedy/c4"]
    assert essay and all(t.method.name == UNPAIRED for t in essay)
    assert "8 prompts" in (essay[0].method.why or "")
    keyless = [replace(s, keys=None) for s in c.samples()]
    cmp2 = compare(b.samples(), keyless)
    assert {t.method.name for t in cmp2.tested} == {UNPAIRED}
    assert "does not say which prompt" in (cmp2.tested[0].method.why or "")
    docs = {(t["cell"], t["figure"]): t["test"] for t in cmp.to_json()["tests"]}
    doc = docs[("code/official/c4", "mean_acceptance_length")]
    assert doc["method"] == PAIRED and doc["pairs"] == 16 and doc["same_seeds"] is False
    assert docs[("code/greedy/c4", "mean_acceptance_length")]["same_seeds"] is True  # greedy
    assert docs[("essay/greedy/c4", "mean_acceptance_length")]["why_unpaired"]


def test_the_paired_gate_passes_every_recorded_self_pair_and_fires_at_most_nominal():
    """Every unordered pair of 21 measurements of one server: no gate fails, and the single
    tests of the sampled cells fall at or below 0.05 in at most 5% of cases (the recorded
    rate is in benchmarks/results/gate_paired.txt)."""
    ms = self_gates()
    ps, failed = [], 0
    for i, j in itertools.combinations(range(len(ms)), 2):
        cmp = compare(ms[i].samples(), ms[j].samples())
        failed += not cmp.passed
        ps += [t.p for t in cmp.tested if "/official/" in t.cell]
        assert all(t.method.name == PAIRED for t in cmp.tested if "/official/" in t.cell)
    assert failed == 0
    assert len(ps) > 900 and sum(p <= 0.05 for p in ps) <= 0.05 * len(ps)


# ---- the smallest drop caught --------------------------------------------------------------

def test_the_smallest_drop_is_the_first_on_the_grid_that_is_called():
    b, c = cell(demo("baseline"), "essay/official/c4"), cell(demo("same"), "essay/official/c4")
    pairs, _ = cell_pairs(b, c)
    assert pairs is not None
    level = 0.05 / 11
    for fig in ("mean_acceptance_length", "per_position[0]"):
        x = paired.smallest_drop(pairs, fig, level)
        assert x is not None and 0 < x < 1
        base = paired.figure_value(pairs.base, fig)
        cand = paired.figure_value(pairs.cand, fig)
        assert base is not None and cand is not None
        off = 1.0 if fig == "mean_acceptance_length" else 0.0

        def p_at(d: float) -> float:
            return paired.sign_flip_p(pairs, fig, (base * (1 - d) - off) / (cand - off))

        assert p_at(x) <= level
        before = paired.DROP_GRID[paired.DROP_GRID.index(x) - 1]
        assert p_at(before) > level


def test_the_gate_prints_one_sensitivity_line_per_figure():
    from specdoctor.gate import text
    from specdoctor.gate.run import PASS, Candidate, GateResult

    base, cand = demo("baseline"), demo("same")
    cmp = compare(base.samples(), cand.samples(), sensitivity=True)
    res = GateResult(base, "demo-baseline.json", Candidate("--url http://127.0.0.1:8000",
                                                            url="http://127.0.0.1:8000"),
                     run_id=1, params=base.matrix, comparison=cmp, exit_code=PASS)
    out = text.render(res)
    lines = out.splitlines()
    for name in ("mean acceptance length", "per-position rates"):
        line = next(ln for ln in lines if ln.startswith(f"  {name}: would catch a drop of ≥ "))
        assert "at this baseline size (16 requests a cell)" in line
    assert "  speedup over spec-off: not gated (the baseline has no spec-off measurement)" in lines
    assert "paired over 16 prompts" in out
    assert {x["test"]["method"] for x in cmp.to_json()["sensitivity"]} == {PAIRED, UNPAIRED}
    # where the gate called a change, a drop injected on top says nothing of its reach
    fault = compare(base.samples(), demo("fault").samples(), sensitivity=True)
    res.comparison = fault
    lines = text.render(res).splitlines()
    assert "  mean acceptance length: not measured (the gate called a change there, in every " \
           "cell)" in lines
    assert all(x.drop is None for x in fault.sensitivity)
