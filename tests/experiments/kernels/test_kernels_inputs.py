"""Paged inputs: the cache holds the logical K/V through a shuffled block table; bad inputs
get one clear message each."""

from __future__ import annotations

import pytest

from specdoctor.errors import InputError
from specdoctor.experiments.kernels.cases import Case, load_suite

torch = pytest.importorskip("torch")

from specdoctor.experiments.kernels.inputs import build, gather, validate  # noqa: E402

CASE = Case("t", ((37, 8), (5, 1), (0, 3)), window=16, causal=False, data="edge")


def test_pages_hold_the_logical_kv_through_a_shuffled_table():
    p = build(CASE)
    validate(p)
    assert p.k_cache.shape[1:] == (16, 2, 64)
    used = [b for s, (c, n) in enumerate(CASE.seqs)
            for b in p.block_table[s, : (c + n + 15) // 16].tolist()]
    assert used != sorted(used), "the block table should be shuffled"
    for s, (ctx, n) in enumerate(CASE.seqs):
        got = gather(p.k_cache, p.block_table[s], ctx + n).double()
        assert torch.equal(got, p.k_logical[s])
        # the slots after the sequence's end hold stale data, not zeros or a copy
        last = p.block_table[s, (ctx + n - 1) // 16]
        tail = p.k_cache[last, (ctx + n) % 16:].double()
        if (ctx + n) % 16:
            assert tail.abs().max() > 1.0
    assert p.seqs == list(CASE.seqs)


def _broken(**change):
    p = build(Case("t", ((20, 4), (3, 1))))
    for k, v in change.items():
        setattr(p, k, v(p))
    return p


@pytest.mark.parametrize("change,message", [
    ({"q": lambda p: p.q[:, :, :32]}, "q head size 32 != cache head size 64"),
    ({"v_cache": lambda p: p.v_cache[:-1]}, "k_cache"),
    ({"block_table": lambda p: p.block_table + 100}, "points outside the cache"),
    ({"cu_seqlens_q": lambda p: p.cu_seqlens_q[:-1]}, "sequences in seqused_k"),
    ({"seqused_k": lambda p: p.seqused_k.clone().fill_(2)}, "seqused_k=2"),
    ({"q": lambda p: p.q.clone().index_fill_(0, torch.tensor([2]), float("nan"))}, "q holds NaN"),
])
def test_bad_inputs_one_message_each(change, message):
    with pytest.raises(InputError) as exc:
        validate(_broken(**change), "dump")
    assert message in str(exc.value) and str(exc.value).startswith("dump: ")


def test_nan_only_matters_in_slots_a_sequence_owns():
    p = build(Case("t", ((20, 4),)))
    owned = p.block_table[0, 0]
    spare = next(b for b in range(p.k_cache.shape[0]) if b not in p.block_table[0].tolist())
    p.k_cache[spare] = float("nan")
    validate(p)  # stale NaN nobody reads is not an error
    p.k_cache[owned, 3] = float("nan")
    with pytest.raises(InputError, match="k_cache holds NaN at sequence 0, key position 3"):
        validate(p)


def test_suites_and_bad_case_descriptions(tmp_path):
    assert {c.data for c in load_suite("default")} == {"random", "edge"}
    f = tmp_path / "s.json"
    f.write_text('[{"seqs": [[10, 2]], "heads_q": 6, "heads_kv": 4}]')
    with pytest.raises(InputError, match="heads_q=6 is not a multiple of heads_kv=4"):
        load_suite(str(f))
    f.write_text('[{"seqs": [[10, 2]], "windw": 4}]')
    with pytest.raises(InputError, match="unknown fields"):
        load_suite(str(f))
    f.write_text('[{"seqs": [[10, 2]], "window": 4, "causal": false}]')
    assert load_suite(str(f))[0].mask == "non-causal, window 4"
    with pytest.raises(InputError, match="no suite"):
        load_suite("nope")
