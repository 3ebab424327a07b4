"""GGUF files as specdoctor reads them: llama.cpp's drafter compatibility rules on the metadata
(pure), and the lab's own GGUF read back: its metadata, and its weights as a Hugging Face
directory equal to the weights it was written from."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from specdoctor import gguf_files as G
from specdoctor.errors import InputError

TOKENS = tuple(f"t{i}" for i in range(300))
BASE = G.Meta(path=Path("t.gguf"), architecture="llama", file_type="f32", context_length=2048,
              tokenizer_model="gpt2", tokens=TOKENS, token_types=(1,) * 300, bos_id=0, eos_id=1,
              add_bos=False, add_eos=False)


def _with(**kw: object) -> G.Meta:
    return dataclasses.replace(BASE, **kw)


def test_a_drafter_of_the_same_vocabulary_is_compatible() -> None:
    assert G.llamacpp_compatible(BASE, _with(file_type="q8_0")) == []
    # ids below 5 are not compared (llama.cpp starts its text check at 5)
    assert G.llamacpp_compatible(BASE, _with(tokens=("x",) + TOKENS[1:])) == []
    # BOS ids differ but neither adds BOS: compatible
    assert G.llamacpp_compatible(BASE, _with(bos_id=7)) == []
    # sizes within 128 of each other, same texts on the shared ids
    assert G.llamacpp_compatible(BASE, _with(tokens=TOKENS[:200])) == []


@pytest.mark.parametrize("change, said", [
    ({"tokenizer_model": "llama"}, "tokenizer models differ"),
    ({"add_bos": True}, "adds BOS"),
    ({"add_eos": True}, "adds EOS"),
    ({"tokens": TOKENS[:100]}, "sizes differ by 200"),
    ({"tokens": TOKENS[:9] + ("changed",) + TOKENS[10:]}, "differs at 1 id(s) from 5 up (ids 9)"),
])
def test_each_rule_of_llamacpp_refuses_its_drafter(change: dict, said: str) -> None:
    why = G.llamacpp_compatible(BASE, _with(**change))
    assert len(why) == 1 and said in why[0], why


def test_both_add_bos_with_other_ids_is_refused() -> None:
    t, d = _with(add_bos=True), _with(add_bos=True, bos_id=3)
    assert ["BOS ids differ (target 0, drafter 3)"] == G.llamacpp_compatible(t, d)


def test_a_file_that_is_not_gguf_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "model.gguf"
    f.write_bytes(b"PK\x03\x04 not gguf")
    assert not G.is_gguf(f) and not G.is_gguf(tmp_path / "absent.gguf")
    with pytest.raises(InputError, match="not a GGUF file"):
        G.metadata(f)


def _missing(*modules: str) -> str | None:
    for m in modules:
        if importlib.util.find_spec(m) is None:
            return f"{m} is not installed (bash scripts/install.sh test and llamacpp)"
    return None


needs_gguf = pytest.mark.skipif(_missing("gguf", "torch", "transformers") is not None,
                                reason=_missing("gguf", "torch", "transformers") or "")


@needs_gguf
def test_a_damaged_gguf_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF" + b"\xff" * 40)
    with pytest.raises(InputError, match="metadata cannot be read"):
        G.metadata(f)


@needs_gguf
def test_the_lab_gguf_reads_back_as_the_model_it_was_written_from(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from specdoctor.lab import gguf_export
    from specdoctor.lab.models import target_model

    source = target_model()
    meta = G.metadata(gguf_export.exported(source, "q8_0"))
    assert (meta.architecture, meta.file_type, meta.tokenizer_model) == ("llama", "q8_0", "gpt2")
    assert meta.n_vocab == 1024 and meta.context_length == 2048
    out = G.hf_dir(gguf_export.exported(source, "f32"), tmp_path)
    assert G.hf_dir(gguf_export.exported(source, "f32"), tmp_path) == out   # once per content
    got, want = load_file(out / "model.safetensors"), load_file(source / "model.safetensors")
    assert set(got) == set(want)
    # f32 written, f32 read: every weight equal (the q/k rotary permutation undone)
    assert all(torch.equal(got[k], want[k]) for k in want)
    from transformers import AutoTokenizer

    text = "def f(x):\n    return x * 2  # twice\n"
    assert (AutoTokenizer.from_pretrained(out)(text)["input_ids"]
            == AutoTokenizer.from_pretrained(source)(text)["input_ids"])


def test_a_file_is_hashed_once_per_path_size_and_time(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF" + b"\0" * 100)
    root = tmp_path / "cache"
    first = G.digest(f, root)
    assert first == G.file_digest(f)
    monkeypatch.setattr(G, "file_digest", lambda p: pytest.fail("read the file again"))
    assert G.digest(f, root) == first
    monkeypatch.undo()
    f.write_bytes(b"GGUF" + b"\1" * 101)   # another content, another size: read again
    assert G.digest(f, root) == G.file_digest(f) != first
    (root / "digests.json").write_text("[not an index")
    assert G.digest(f, root) == G.file_digest(f)   # a damaged index is rebuilt
