"""Backend models read from code: the installed vLLM, a snapshot, and edited code."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.experiments.masks.backends import BACKENDS, parse_convention, resolve
from specdoctor.experiments.masks.cite import CodeRoot
from specdoctor.experiments.masks.diff import diff_masks
from specdoctor.experiments.masks.model import Convention, MaskSpec
from specdoctor.recon.extract import extract

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm")
pytest.importorskip("numpy")

SITE = Path(next(iter(importlib.util.find_spec("vllm").submodule_search_locations))).parent \
    if importlib.util.find_spec("vllm") else None
FA = "vllm/v1/attention/backends/flash_attn.py"
FLEX = "vllm/v1/attention/backends/flex_attention.py"


def test_installed_code_gives_each_backend_its_convention_with_citations():
    spec = MaskSpec(4, False)
    code = CodeRoot(None)
    fa2 = resolve("fa2", spec, code)
    assert fa2.convention == Convention("W-1", "symmetric", "<=", "bottom-right")
    for cite in fa2.citations:
        assert cite.found, cite
        path = SITE / cite.path
        assert cite.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert path.read_text().splitlines()[cite.line - 1].strip() == cite.text
    window = next(c for c in fa2.citations if c.key == "window_arg")
    assert "sliding_window - 1, 0" in window.text
    flex = resolve("flex", spec, code)
    assert flex.convention.edge == next(c for c in flex.citations if c.key == "window").groups[0]
    # Causal layers keep FA's (W-1, 0): the symmetrisation is for non-causal ones only.
    assert resolve("fa2", MaskSpec(4, True), code).convention.sides == "one-sided"


def test_installed_backends_agree_on_dflash_style_masks():
    code = CodeRoot(None)
    for spec in (MaskSpec(4, False), MaskSpec(4, True), MaskSpec(None, False)):
        models = [resolve(i, spec, code) for i in ("fa2", "flex", "triton", "cpu")]
        d = diff_masks(models, spec, 0, 24, 8)
        assert d.identical, (spec, d.groups)


def _edited_root(tmp_path: Path, rel: str, old: str, new: str) -> Path:
    text = (SITE / rel).read_text()
    assert old in text
    dest = tmp_path / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text.replace(old, new))
    return tmp_path


def test_an_edge_operator_in_the_code_becomes_a_diagonal_difference(tmp_path):
    root = _edited_root(tmp_path, FLEX, "torch.abs(q_idx - kv_idx) < self.sliding_window",
                        "torch.abs(q_idx - kv_idx) <= self.sliding_window")
    spec = MaskSpec(6, False)
    code = CodeRoot(root)
    flex = resolve("flex", spec, code)
    assert flex.convention.edge == "<="
    assert next(c for c in flex.citations if c.key == "window").origin.startswith("directory")
    d = diff_masks([resolve("fa2", spec, code), flex], spec, 0, 20, 8)
    assert not d.identical
    (pair,) = d.pairs
    assert set(pair.distances) == {6, -6}
    assert all(c.b and not c.a for c in pair.listed)


def test_code_without_symmetrisation_hides_the_future(tmp_path):
    root = _edited_root(tmp_path, FA, "return (window[0], window[0])", "return window")
    spec = MaskSpec(4, False)
    fa2 = resolve("fa2", spec, CodeRoot(root))
    assert fa2.convention.sides == "one-sided"
    assert any("symmetrisation" in n for n in fa2.notes)
    d = diff_masks([fa2, resolve("flex", spec, CodeRoot(root))], spec, 0, 8, 8)
    assert all(d_ < 0 for d_ in d.pairs[0].distances)  # only keys after the query differ


def test_snapshot_code_root_cites_the_snapshot(tmp_path):
    snap, _ = extract(str(SITE), tmp_path / "snap", ["vllm:attention"])
    code = CodeRoot(tmp_path / "snap")
    fa2 = resolve("fa2", MaskSpec(4, False), code)
    cite = next(c for c in fa2.citations if c.key == "window_arg")
    assert cite.origin.startswith("snapshot")
    assert cite.sha256 == snap.file(FA).sha256
    sdpa = resolve("sdpa", MaskSpec(None, True), code)  # torch is not in a vLLM snapshot
    assert sdpa.citations[0].found and sdpa.citations[0].origin == "installed"
    assert sdpa.convention.causal_align == "top-left"


def test_convention_overrides_and_errors():
    impl, conv = parse_convention("fa2=W,symmetric,<=")
    assert impl == "fa2" and conv == Convention("W", "symmetric", "<=")
    r = resolve("fa2", MaskSpec(4, False), CodeRoot(None), conv)
    assert r.convention == conv and "code says" in r.notes[-1]
    with pytest.raises(InputError, match="cannot read --convention"):
        parse_convention("fa3=W,symmetric,<")
    with pytest.raises(InputError, match="W\\+1"):
        parse_convention("fa2=W+1,symmetric,<")
    with pytest.raises(InputError, match="unknown attention implementation"):
        resolve("fa3", MaskSpec(4, False), CodeRoot(None))
    assert set(BACKENDS) == {"fa2", "flex", "triton", "cpu", "sdpa"}
