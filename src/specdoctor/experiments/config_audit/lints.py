"""Launch lints: settings and start-up warnings that cost speculative decoding, found before
(or without) a measurement. Pure functions over numbers and log text.

- cudagraph capture sizes vs k+1: vLLM rounds every capture size up to a multiple of k+1 and
  drops those above the maximum (vllm/config/compilation.py,
  ``adjust_cudagraph_sizes_for_spec_decode``); none left → "No valid cudagraph sizes" at start-up
  (Case B: MTP4 needs a maximum of at least 5, and 10 for two decode sequences);
- k vs the drafter's trained block: a DFlash block is 1 + k query positions; past the block
  size the drafter predicts positions it never trained on (Case A: num_spec 5 ≈ 7 for a
  block-8 drafter);
- warnings in the start-up log that turn a feature off (async scheduling, min_p / logit_bias
  with speculative decoding, a compile cache that failed to load).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Lint:
    level: str           # "info", "suspect", "problem"
    check: str
    detail: str
    evidence: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def cudagraph_sizes_for_k(sizes: Sequence[int], max_size: int, k: int) -> list[int]:
    """The capture sizes vLLM keeps for k draft tokens (the rule of
    ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``, vLLM 0.32)."""
    m = k + 1
    if not sizes or m <= 1:
        return sorted(sizes)
    kept = sorted({round_up(s, m) for s in sizes if round_up(s, m) <= max_size})
    if not kept and m <= max_size:
        kept = [m]
    return kept


def lint_cudagraph(k: int, sizes: Sequence[int] | None, max_size: int | None,
                   max_num_seqs: int | None = None) -> list[Lint]:
    if max_size is None and sizes:
        max_size = max(sizes)
    if max_size is None:
        return []
    kept = cudagraph_sizes_for_k(list(sizes or [max_size]), max_size, k)
    if not kept:
        return [Lint("problem", "cudagraph sizes", f"no capture size survives rounding to a "
                     f"multiple of k+1 = {k + 1} under the maximum {max_size}: vLLM refuses to "
                     "start (\"No valid cudagraph sizes\"); raise max_cudagraph_capture_size to "
                     f"at least {k + 1} or lower k")]
    out = []
    if max_num_seqs and kept[-1] < (k + 1) * max_num_seqs:
        out.append(Lint("info", "cudagraph sizes", f"the largest captured batch ({kept[-1]} "
                        f"tokens = {kept[-1] // (k + 1)} sequences at k={k}) is below "
                        f"max_num_seqs={max_num_seqs}: larger decode batches run eagerly"))
    return out


BLOCK_METHOD = "dflash"  # the method whose drafters are trained on a block of k+1 positions


def lint_block_size(k: int, block_size: int | None, method: str = BLOCK_METHOD) -> list[Lint]:
    """k against the block the drafter was trained for (DFlash: 1 + k query positions)."""
    if not block_size:
        return []
    if k + 1 > block_size:
        return [Lint("suspect", "k vs trained block", f"k={k} asks for {k + 1} block positions; "
                     f"the {method} drafter was trained with block_size {block_size}: positions "
                     f"past {block_size - 1} drafts are untrained")]
    if k + 1 < block_size // 2:
        return [Lint("info", "k vs trained block", f"k={k} uses {k + 1} of the drafter's "
                     f"{block_size} trained block positions")]
    return []


# (pattern, level, what it means) — texts as vLLM 0.32 logs them (file in the comment).
_LOG_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # vllm/config/vllm.py
    (re.compile(r"Async scheduling (not supported with|is not compatible with|will be "
                r"disabled|is disabled)[^\n]*"), "info",
     "async scheduling is off for this launch: steps do not overlap with scheduling"),
    # vllm/v1/sample/logits_processor/__init__.py
    (re.compile(r"min_p and logit_bias parameters won't work with speculative decoding[^\n]*"),
     "suspect", "requests' min_p and logit_bias are ignored while speculating"),
    # vllm/config/compilation.py
    (re.compile(r"No valid cudagraph sizes[^\n]*"), "problem",
     "start-up failed: no cudagraph size fits k+1"),
    # vllm/compilation (AOT cache)
    (re.compile(r"Compiling model again due to a load failure from [^\n]*"), "info",
     "a compile-cache entry failed to load and was recompiled (see `specdoctor cache scan`)"),
    (re.compile(r"WARNING[^\n]*(speculat|draft|spec decod)[^\n]*(disabl|not supported|ignor|"
                r"won't|will not|fall(ing)? back)[^\n]*", re.IGNORECASE), "info",
     "a warning about speculative decoding"),
)


def lint_log(text: str) -> list[Lint]:
    """Feature-disabling warnings in a start-up log, each once, with the line as evidence."""
    out: list[Lint] = []
    seen: set[str] = set()
    for line in text.splitlines():
        for pat, level, meaning in _LOG_RULES:
            m = pat.search(line)
            if m:
                key = meaning + "|" + m.group(0)[:80]
                if key not in seen:
                    seen.add(key)
                    out.append(Lint(level, "start-up log", meaning, line.strip()[:300]))
                break
    return out
