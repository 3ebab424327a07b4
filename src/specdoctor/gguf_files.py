"""GGUF files, read as the rest of specdoctor reads served files.

llama-server serves GGUF (``-m T.gguf -md D.gguf``). Two readings of such a file:

- ``metadata``: what llama.cpp itself reads of it before drafting: the architecture, the
  vocabulary (token texts and types, the tokenizer model), the special tokens and whether they
  are added, the context length and the tensor type. Read with the ``gguf`` package's reader
  (numpy only, no torch). A file that is not GGUF, or whose metadata cannot be read, is bad
  input naming it (exit 2).
- ``hf_dir``: the same weights as a Hugging Face model directory, for the oracle and the
  experiments that read a model directory. transformers' GGUF loader undoes llama.cpp's
  converter (tensor names, the q/k rotary permutation) and dequantizes (q8_0, q4_K, … become
  fp32: the oracle then runs the weights the server holds, not its quantized kernels). Written
  once per file content under ``$SPECDOCTOR_HOME/gguf/<sha256>``, atomically (the file is
  hashed once per path, size and modification time: ``digest``); torch,
  transformers and accelerate are imported there only.

``llamacpp_compatible`` is llama.cpp's own test of whether a drafter may draft for a target
(``common_speculative_are_compatible``): the same tokenizer model, the same BOS (when added)
and EOS (when added), vocabulary sizes within 128 of each other, and the same token text at
every id from 5 up. A pair that fails it is refused when the server starts, which then serves
without speculation (an error line in its log, nothing drafted).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor import paths
from specdoctor.errors import InputError

MAGIC = b"GGUF"
# llama.cpp common/speculative.cpp: SPEC_VOCAB_MAX_SIZE_DIFFERENCE, SPEC_VOCAB_CHECK_START_TOKEN_ID
MAX_VOCAB_SIZE_DIFFERENCE = 128
CHECK_START_TOKEN_ID = 5
# general.file_type (llama_ftype) names of the common types; others are shown by number
FILE_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 7: "q8_0", 8: "q5_0", 9: "q5_1",
              10: "q2_K", 12: "q3_K_M", 15: "q4_K_M", 17: "q5_K_M", 18: "q6_K", 32: "bf16"}
HF_DIR_VERSION = 1


@dataclass(frozen=True)
class Meta:
    """What llama.cpp reads of one GGUF file before it drafts with it."""

    path: Path
    architecture: str
    file_type: str
    context_length: int | None
    tokenizer_model: str
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    bos_id: int | None
    eos_id: int | None
    add_bos: bool
    add_eos: bool

    @property
    def n_vocab(self) -> int:
        return len(self.tokens)


def is_gguf(path: Path) -> bool:
    """A regular file that starts with GGUF's magic (whatever its name)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def metadata(path: Path) -> Meta:
    """The file's metadata as llama.cpp reads it; bad input when it is no readable GGUF."""
    path = Path(path)
    if not is_gguf(path):
        raise InputError(f"{path} is not a GGUF file (no GGUF magic at its start)",
                         "give the .gguf file llama-server reads (-m, -md), or a Hugging Face "
                         "model directory")
    try:
        from gguf import GGUFReader
    except ImportError as exc:
        raise InputError("reading a GGUF file needs the gguf package",
                         "bash scripts/install.sh llamacpp (or pip install gguf)") from exc
    try:
        fields = GGUFReader(str(path), "r").fields
        arch = str(_value(fields, "general.architecture", ""))
        return Meta(
            path=path, architecture=arch,
            file_type=_file_type(_value(fields, "general.file_type", None)),
            context_length=_int(_value(fields, f"{arch}.context_length", None)),
            tokenizer_model=str(_value(fields, "tokenizer.ggml.model", "")),
            tokens=tuple(str(t) for t in _value(fields, "tokenizer.ggml.tokens", []) or []),
            token_types=tuple(int(t) for t in
                              _value(fields, "tokenizer.ggml.token_type", []) or []),
            bos_id=_int(_value(fields, "tokenizer.ggml.bos_token_id", None)),
            eos_id=_int(_value(fields, "tokenizer.ggml.eos_token_id", None)),
            add_bos=bool(_value(fields, "tokenizer.ggml.add_bos_token", False)),
            add_eos=bool(_value(fields, "tokenizer.ggml.add_eos_token", False)))
    except (ValueError, KeyError, IndexError, TypeError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: its GGUF metadata cannot be read ({type(exc).__name__}: "
                         f"{str(exc)[:120]})", "give an intact GGUF file") from exc


def _value(fields: Any, key: str, default: Any) -> Any:
    f = fields.get(key)
    return default if f is None else f.contents()


def _int(v: Any) -> int | None:
    return None if v is None or isinstance(v, bool) else int(v)


def _file_type(v: Any) -> str:
    if v is None:
        return "unknown"
    return FILE_TYPES.get(int(v), f"type {int(v)}")


def llamacpp_compatible(target: Meta, draft: Meta) -> list[str]:
    """Why llama.cpp refuses ``draft`` as a drafter for ``target``, each reason a sentence
    (empty: it drafts). Pure; the rules of ``common_speculative_are_compatible``."""
    why: list[str] = []
    if target.tokenizer_model != draft.tokenizer_model:
        why.append(f"the tokenizer models differ ({target.tokenizer_model!r} in the target, "
                   f"{draft.tokenizer_model!r} in the drafter)")
    if target.add_bos != draft.add_bos:
        why.append(f"one adds BOS and the other does not (target {target.add_bos}, "
                   f"drafter {draft.add_bos})")
    elif target.add_bos and target.bos_id != draft.bos_id:
        why.append(f"BOS ids differ (target {target.bos_id}, drafter {draft.bos_id})")
    if target.add_eos != draft.add_eos:
        why.append(f"one adds EOS and the other does not (target {target.add_eos}, "
                   f"drafter {draft.add_eos})")
    elif target.add_eos and target.eos_id != draft.eos_id:
        why.append(f"EOS ids differ (target {target.eos_id}, drafter {draft.eos_id})")
    diff = abs(target.n_vocab - draft.n_vocab)
    if diff > MAX_VOCAB_SIZE_DIFFERENCE:
        why.append(f"the vocabulary sizes differ by {diff} (target {target.n_vocab}, drafter "
                   f"{draft.n_vocab}; at most {MAX_VOCAB_SIZE_DIFFERENCE})")
    else:
        differ = text_differences(target, draft)
        if differ:
            shown = ", ".join(str(i) for i in differ[:5]) + (" …" if len(differ) > 5 else "")
            why.append(f"the token text differs at {len(differ)} id(s) from "
                       f"{CHECK_START_TOKEN_ID} up (ids {shown})")
    return why


def text_differences(target: Meta, draft: Meta) -> list[int]:
    """The ids, from ``CHECK_START_TOKEN_ID`` up to the smaller vocabulary, whose token text
    differs between the two files."""
    n = min(target.n_vocab, draft.n_vocab)
    return [i for i in range(CHECK_START_TOKEN_ID, n) if target.tokens[i] != draft.tokens[i]]


def file_digest(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def digest(path: Path, root: Path) -> str:
    """The file's sha256, read whole once per (path, size, modification time): kept in
    ``root/digests.json``, so a diagnosis does not read a many-gigabyte GGUF again to find the
    directory it was converted to. A damaged index is rebuilt."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    index = root / "digests.json"
    try:
        known = json.loads(index.read_text()) if index.is_file() else {}
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    got = known.get(key)
    if isinstance(got, str) and len(got) == 64 and all(c in "0123456789abcdef" for c in got):
        return got
    got = known[key] = file_digest(path)
    root.mkdir(parents=True, exist_ok=True)
    tmp = index.with_name(f"{index.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(known))
    tmp.replace(index)
    return got


def hf_dir(path: Path, root: Path | None = None) -> Path:
    """The GGUF file's weights, config and tokenizer as a Hugging Face directory, written once
    per file content (``root``: default ``$SPECDOCTOR_HOME/gguf``). Bad input when the file is
    no GGUF or transformers cannot read its architecture; a missing transformers, torch or
    accelerate is named with the install that brings it."""
    path = Path(path)
    meta = metadata(path)
    root = root or paths.home() / "gguf"
    out = root / f"{digest(path, root)[:24]}-v{HF_DIR_VERSION}"
    if (out / "config.json").is_file():
        return out
    try:
        import accelerate  # noqa: F401  (transformers' GGUF loading needs it)
        import torch
        import transformers
    except ImportError as exc:
        raise InputError(f"reading {path.name} as the oracle reads models needs torch, "
                         f"transformers and accelerate ({exc.name} is missing)",
                         "bash scripts/install.sh oracle") from exc
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        kw = {"gguf_file": path.name}
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), dtype=torch.float32, **kw)
        # the weights are plain fp32 now: saved as such, not as a GGUF "quantization"
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        transformers.AutoTokenizer.from_pretrained(str(path.parent), **kw).save_pretrained(tmp)
        if not out.exists():   # else another process wrote it first: keep its copy
            tmp.rename(out)
    except (ValueError, KeyError, RuntimeError, OSError) as exc:
        raise InputError(f"{path}: transformers cannot read this GGUF (architecture "
                         f"{meta.architecture!r}): {type(exc).__name__}: {str(exc)[:160]}",
                         "give the Hugging Face directory it was converted from (--target, "
                         "--draft)") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
