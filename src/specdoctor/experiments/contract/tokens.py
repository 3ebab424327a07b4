"""What a tokenizer says about a token id: the reference for config fields that name a token
(DFlash's ``mask_token_id``, a parallel-drafting ``pard_token``).

A token a drafter uses as a placeholder (the masked slots of a DFlash block) must be one that
ordinary text never produces: an added special token that is neither the sequence's start nor
its end, or a reserved id past the tokenizer's vocabulary but inside the embedding. An id of the
ordinary vocabulary, or the bos/eos token that every sequence carries, makes the placeholder
indistinguishable from real content.

Read from the tokenizer files (``tokenizer.json``, ``tokenizer_config.json``,
``special_tokens_map.json``); counting an id in text tokenizes it with the ``tokenizers``
library, where installed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("bos", "eos", "pad", "unk", "mask")


@dataclass(frozen=True)
class TokenizerFacts:
    size: int                                  # ids the tokenizer can produce (0..size-1)
    ordinary: frozenset[int]                   # ids of its model's vocabulary, not added
    special: dict[int, str] = field(default_factory=dict)   # added special id -> content
    roles: dict[str, int] = field(default_factory=dict)     # "bos"/"eos"/"pad"/... -> id

    def describe(self, tid: int) -> str:
        role = next((r for r, i in self.roles.items() if i == tid), None)
        if tid in self.special:
            return f"{self.special[tid]!r}" + (f" (the {role} token)" if role else "")
        if tid in self.ordinary:
            return "an ordinary vocabulary token"
        if tid >= self.size:
            return "a reserved id past the tokenizer's vocabulary"
        return "an id the tokenizer does not name"


@dataclass(frozen=True)
class TokenVerdict:
    ok: bool
    why: str
    candidates: tuple[tuple[int, str], ...] = ()    # (id, what it is), best first


def read(tokenizer_dir: Path) -> TokenizerFacts | None:
    """The facts, or None where the directory has no ``tokenizer.json`` this can read."""
    tj = tokenizer_dir / "tokenizer.json"
    try:
        data = json.loads(tj.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    vocab = (data.get("model") or {}).get("vocab")
    if isinstance(vocab, list):          # unigram: [[piece, score], ...]
        ordinary = set(range(len(vocab)))
    elif isinstance(vocab, dict):
        ordinary = {int(i) for i in vocab.values()}
    else:
        return None
    special: dict[int, str] = {}
    added_ids: set[int] = set()
    by_content: dict[str, int] = {}
    for t in data.get("added_tokens") or []:
        tid, content = int(t["id"]), str(t.get("content"))
        added_ids.add(tid)
        by_content[content] = tid
        if t.get("special", False):
            special[tid] = content
    ordinary -= added_ids
    roles = _roles(tokenizer_dir, by_content)
    size = max([*ordinary, *added_ids], default=-1) + 1
    return TokenizerFacts(size, frozenset(ordinary), special, roles)


def _roles(d: Path, by_content: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        try:
            raw: dict[str, Any] = json.loads((d / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for role in ROLES:
            v = raw.get(f"{role}_token")
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str) and v in by_content:
                out.setdefault(role, by_content[v])
    return out


def check_placeholder(tid: Any, facts: TokenizerFacts, embedding_rows: int | None
                      ) -> TokenVerdict:
    """Is ``tid`` a placeholder ordinary text never produces, with a valid row (pure)?"""
    cands = tuple(placeholders(facts, embedding_rows))
    if not isinstance(tid, int) or isinstance(tid, bool):
        return TokenVerdict(False, f"{tid!r} is not a token id", cands)
    if tid < 0 or (embedding_rows is not None and tid >= embedding_rows):
        return TokenVerdict(False, f"{tid} has no row in the {embedding_rows}-token embedding",
                            cands)
    what = facts.describe(tid)
    for role in ("bos", "eos"):
        if facts.roles.get(role) == tid:
            return TokenVerdict(False, f"{tid} is {what}: every sequence carries it, so the "
                                       "placeholder is also real content", cands)
    if tid in facts.ordinary:
        return TokenVerdict(False, f"{tid} is {what}: ordinary text produces it", cands)
    return TokenVerdict(True, f"{tid} is {what}: ordinary text never produces it")


def placeholders(facts: TokenizerFacts, embedding_rows: int | None) -> list[tuple[int, str]]:
    """Ids fit to be a placeholder, best first: the tokenizer's own mask token, its other
    special tokens that are neither bos nor eos, then the first reserved id past its vocabulary
    (where the embedding has one)."""
    out: list[tuple[int, str]] = []
    if "mask" in facts.roles:
        mask = facts.roles["mask"]
        out.append((mask, f"the tokenizer's mask token {facts.describe(mask)}"))
    skip = {facts.roles.get("bos"), facts.roles.get("eos")} | {i for i, _ in out}
    for tid in sorted(facts.special):
        if tid not in skip:
            out.append((tid, f"the tokenizer's special token {facts.describe(tid)}"))
    if embedding_rows is not None and facts.size < embedding_rows:
        out.append((facts.size, "the first reserved id past the tokenizer's vocabulary"))
    return out


def count_in(tokenizer_dir: Path, texts: list[str], tid: int) -> int | None:
    """How often ``tid`` appears when ``texts`` are tokenized (None: no tokenizer library)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    try:
        tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    except Exception:  # noqa: BLE001 - any unreadable tokenizer: no count, said so by None
        return None
    return sum(enc.ids.count(tid) for enc in tok.encode_batch(texts))
