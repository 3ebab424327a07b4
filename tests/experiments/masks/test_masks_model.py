"""The pure mask model: vectorised path = plain-Python reference, and the identities it rests on."""

from __future__ import annotations

import itertools

import pytest

from specdoctor.experiments.masks.model import (
    ALIGNS,
    EDGES,
    SIDES,
    WINDOW_ARGS,
    Convention,
    MaskSpec,
    mask_array,
    mask_rows,
    render,
)

np = pytest.importorskip("numpy")

CONVENTIONS = [Convention(*c) for c in itertools.product(WINDOW_ARGS, SIDES, EDGES, ALIGNS)]
SPECS = [MaskSpec(w, c) for w in (None, 1, 3, 5) for c in (False, True)]


@pytest.mark.parametrize("conv", CONVENTIONS, ids=lambda c: c.describe())
def test_numpy_path_equals_the_python_reference(conv):
    for spec in SPECS:
        for ctx in (0, 1, 4, 9):
            ref = np.array(mask_rows(conv, spec, ctx, 4), dtype=bool)
            assert (mask_array(conv, spec, ctx, 4) == ref).all(), (spec, ctx)


def _all(conv, spec, ctxs=range(0, 12), n=4):
    return [mask_array(conv, spec, c, n) for c in ctxs]


def _same(a, b):
    return all((x == y).all() for x, y in zip(a, b, strict=True))


def test_w_minus_one_inclusive_is_w_exclusive():
    # FlashAttention's (W-1, W-1) inclusive window and FlexAttention's |q-k| < W.
    for w in (1, 2, 4, 7):
        spec = MaskSpec(w, False)
        assert _same(_all(Convention("W-1", "symmetric", "<="), spec),
                     _all(Convention("W", "symmetric", "<"), spec))


def test_one_sided_window_hides_the_future_of_a_non_causal_layer():
    spec = MaskSpec(4, False)
    one_sided = _all(Convention("W-1", "one-sided", "<="), spec)
    causal = _all(Convention("W-1", "symmetric", "<="), MaskSpec(4, True))
    assert _same(one_sided, causal)
    # left-only bounds the past and leaves the whole future visible
    left_only = mask_array(Convention("W", "left-only", "<"), spec, 10, 4)
    assert left_only[0, 10:].all() and not left_only[0, :7].any()


def test_edge_operator_moves_exactly_one_diagonal_per_side():
    spec = MaskSpec(3, False)
    lt = mask_array(Convention("W", "symmetric", "<"), spec, 8, 4)
    le = mask_array(Convention("W", "symmetric", "<="), spec, 8, 4)
    q = 8 + np.arange(4)[:, None]
    k = np.arange(12)[None, :]
    diff = lt != le
    assert (np.abs(q - k)[diff] == 3).all()
    assert diff.sum() == (np.abs(q - k) == 3).sum()


def test_top_left_causal_agrees_only_without_context():
    spec = MaskSpec(None, True)
    tl, br = Convention(causal_align="top-left"), Convention(causal_align="bottom-right")
    assert (mask_array(tl, spec, 0, 5) == mask_array(br, spec, 0, 5)).all()
    assert not (mask_array(tl, spec, 3, 5) == mask_array(br, spec, 3, 5)).all()
    assert render(mask_rows(tl, spec, 2, 2)) == ["1...", "11.."]


def test_full_attention_sees_every_key():
    m = mask_array(Convention(), MaskSpec(None, False), 5, 3)
    assert m.all() and m.shape == (3, 8)


def test_bad_conventions_are_refused():
    with pytest.raises(ValueError):
        Convention("W+1")
    with pytest.raises(ValueError):
        MaskSpec(0, False)


def test_reference_mask_is_the_resolved_model():
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs the vllm source to read")
    from specdoctor.experiments.masks.backends import reference_mask

    spec = MaskSpec(3, False)
    got = reference_mask("fa2", spec, 5, 4)
    assert (got == mask_array(Convention("W-1", "symmetric", "<="), spec, 5, 4)).all()


def test_sizes_that_cannot_be_built_are_refused_before_any_mask():
    from specdoctor.errors import InputError
    from specdoctor.experiments.masks.diff import MAX_DIFF_CELLS, MAX_MASK_CELLS, check_size

    check_size(0, 16, 8)  # the default range
    with pytest.raises(InputError, match=f"past the limit of {MAX_MASK_CELLS:,}"):
        check_size(10 ** 8, 10 ** 8, 8)  # one mask of 800M cells
    with pytest.raises(InputError, match=f"past the limit of {MAX_DIFF_CELLS:,}"):
        check_size(0, 20_000, 8)  # each mask small, together 1.6G cells
    with pytest.raises(InputError, match="need 0 <= A <= B"):
        check_size(5, 2, 8)
