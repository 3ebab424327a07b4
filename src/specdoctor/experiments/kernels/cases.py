"""Kernel-equivalence cases and suites: shapes only, no torch.

A case is one batched attention call in the shape a paged serving engine makes it:
several sequences, each with `ctx` tokens already cached and `n_q` new query tokens
(keys at [0, ctx + n_q), queries at ctx + i), GQA heads, a block size, the layer's
mask (window W or none, causal or not), a dtype and the kind of data:

- "random": normal q/k/v, the numeric accuracy a model sees;
- "edge": each query aims its attention at one visible and one hidden key on either
  side of its mask's boundary, so a mask off by a single key moves the output by
  about half a value vector. With random data one key out of thousands changes the
  output by ~1/L, under any bf16 tolerance: a window off by one would pass.

Suites follow the kernel test of Case A: short production contexts, single stream,
window edge, beyond the window; `long` adds long contexts with an fp64 reference.
A user suite is a JSON list of case objects (the fields of `Case`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.textfile import MAX_CONFIG, read_limited

DTYPES = ("float32", "float16", "bfloat16")
DATA = ("random", "edge")
# max |out - ref| allowed per dtype; Case A used 2e-2 against bf16.
TOLERANCES: dict[str, float] = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
# The largest case checked: elements of its KV cache (keys and values, every kv head) and of its
# attention scores (every query head x visible key), each held in fp64 by the reference. 2**27
# elements are 1 GiB in fp64; the `long` suite's largest case needs 2.1M and 2.1M.
MAX_ELEMENTS = 1 << 27
MAX_CASES = 1000  # cases of one user suite (the built-in ones have 4 to 32)
MAX_SEED = 2 ** 63 - 1  # torch's generator takes a 64-bit seed
# A user suite's fields and the JSON types each takes (bool is never an int here, and a
# string is never a bool: "causal": "false" would be true).
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "heads_q": (int,), "heads_kv": (int,), "head_dim": (int,),
    "block_size": (int,), "window": (int, type(None)), "causal": (bool,), "dtype": (str,),
    "data": (str,), "seed": (int,)}


@dataclass(frozen=True)
class Case:
    name: str
    seqs: tuple[tuple[int, int], ...]  # (ctx, n_q) per sequence
    heads_q: int = 8
    heads_kv: int = 2
    head_dim: int = 64
    block_size: int = 16
    window: int | None = None
    causal: bool = True
    dtype: str = "bfloat16"
    data: str = "random"
    seed: int = 0

    def __post_init__(self) -> None:
        problems = validate_case(self)
        if problems:
            raise InputError(f"case {self.name!r}: " + "; ".join(problems),
                             "fix the case description (fields: docs/kernels.md, Suites)")

    @property
    def mask(self) -> str:
        w = f"window {self.window}" if self.window is not None else "full"
        return f"{'causal' if self.causal else 'non-causal'}, {w}"

    def describe(self) -> str:
        seqs = " ".join(f"{c}+{n}" for c, n in self.seqs)
        return (f"{self.mask}; seqs ctx+q {seqs}; H {self.heads_q}/{self.heads_kv} D {self.head_dim} "
                f"block {self.block_size}; {self.dtype}; {self.data} data")


def validate_case(c: Case) -> list[str]:
    out = []
    if not c.seqs:
        out.append("no sequences")
    for ctx, n in c.seqs:
        if ctx < 0 or n < 1:
            out.append(f"sequence ctx={ctx} n_q={n}: need ctx >= 0 and n_q >= 1")
    if c.heads_kv < 1 or c.heads_q < 1 or c.heads_q % c.heads_kv:
        out.append(f"heads_q={c.heads_q} is not a multiple of heads_kv={c.heads_kv}")
    if c.head_dim < 1 or c.block_size < 1:
        out.append("head_dim and block_size must be >= 1")
    if c.window is not None and c.window < 1:
        out.append(f"window={c.window}: must be >= 1 (null for full attention)")
    if c.dtype not in DTYPES:
        out.append(f"dtype {c.dtype!r} is not one of {', '.join(DTYPES)}")
    if c.data not in DATA:
        out.append(f"data {c.data!r} is not one of {', '.join(DATA)}")
    if not out:
        out += _too_large(c)
    return out


def _too_large(c: Case) -> list[str]:
    """The limit a case passes, named, before anything is allocated for it."""
    tokens = sum(ctx + n for ctx, n in c.seqs)
    cache = 2 * tokens * c.heads_kv * c.head_dim
    scores = sum(n * (ctx + n) for ctx, n in c.seqs) * c.heads_q
    big = [f"{what} of {count:,} elements" for what, count in (("a KV cache", cache),
                                                                ("attention scores", scores))
           if count > MAX_ELEMENTS]
    return [f"{' and '.join(big)}: past the limit of {MAX_ELEMENTS:,} (1 GiB in fp64)"] if big else []


W = 64  # the window of the built-in suites (short enough for CPU, long enough for edges)


def _masks(name: str, seqs: tuple[tuple[int, int], ...], kinds: tuple[str, ...] = DATA,
           **kw: Any) -> list[Case]:
    """One shape set under the three masks Case A cared about, random and/or edge data."""
    out = []
    for tag, causal, window in (("causal", True, None), ("noncausal-swa", False, W),
                                ("causal-swa", True, W)):
        for data in kinds:
            out.append(Case(f"{name}/{tag}/{data}", seqs, causal=causal, window=window,
                            data=data, **kw))
    return out


def _default() -> list[Case]:
    cases = []
    cases += _masks("short", ((37, 8), (5, 8), (100, 8), (0, 8)))  # production-like batch
    cases += _masks("single", ((150, 8),))
    cases += _masks("decode", ((120, 1), (7, 1), (300, 1)), kinds=("edge",))
    cases += _masks("window-edge", tuple((c, 8) for c in (W - 9, W - 8, W - 1, W, W + 1)),
                    kinds=("edge",))
    cases += _masks("beyond", ((3 * W + 5, 8), (500, 8)))
    cases += [Case("short/noncausal-full/edge", ((37, 8), (100, 8)), causal=False, data="edge"),
              Case("single/causal-swa/fp32", ((150, 8),), window=W, dtype="float32", data="edge"),
              Case("single/causal/fp16", ((150, 8),), dtype="float16"),
              Case("gqa-1/causal-swa", ((90, 8), (33, 4)), heads_q=4, heads_kv=4, window=W,
                   data="edge"),
              Case("block-32/noncausal-swa", ((90, 8), (33, 4)), block_size=32, causal=False,
                   window=W, data="edge")]
    return cases


def _long() -> list[Case]:
    seqs = ((4000, 8), (8191, 1))
    return _default() + [
        Case("long/causal", seqs, head_dim=128, data="edge"),
        Case("long/noncausal-swa", seqs, head_dim=128, causal=False, window=4096, data="edge"),
        Case("long/causal-swa/random", seqs, head_dim=128, window=4096),
    ]


def _smoke() -> list[Case]:
    return [Case("smoke/causal/edge", ((20, 4), (3, 1)), data="edge"),
            Case("smoke/noncausal-swa/edge", ((20, 4), (12, 4)), causal=False, window=8, data="edge"),
            Case("smoke/causal-swa/random", ((20, 4),), window=8),
            Case("smoke/noncausal-full/fp32", ((9, 4),), causal=False, dtype="float32")]


SUITES = {"default": _default, "long": _long, "smoke": _smoke}
DEFAULT_SUITE = "default"
# The built-in implementations, in the order `kernels check` runs them (adapters.BUILTIN).
IMPLS = ("sdpa", "flex", "vllm-cpu", "flash-attn")
DEVICES = ("cpu", "cuda")
DEFAULT_DEVICE = "cpu"


def _seqs(raw: Any) -> tuple[tuple[int, int], ...] | None:
    """[[ctx, n_q], …] as whole-number pairs, or None (a float, an infinity, a string)."""
    if not isinstance(raw, list):
        return None
    out = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(type(x) is int for x in pair)):
            return None
        out.append((pair[0], pair[1]))
    return tuple(out)


def load_suite(name: str) -> list[Case]:
    """A built-in suite by name, or a JSON file listing cases."""
    if name in SUITES:
        return SUITES[name]()
    path = Path(name)
    if not path.is_file():
        raise InputError(f"no suite {name!r}",
                         f"use one of {', '.join(SUITES)} or a JSON file of cases")
    try:
        raw = json.loads(read_limited(path, "kernel suite", MAX_CONFIG, "--suite"))
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, not UTF-8, or not JSON
        raise InputError(f"cannot read suite {path}: {exc}", "write a JSON list of case objects") from exc
    if not isinstance(raw, list) or not raw:
        raise InputError(f"suite {path} is not a non-empty JSON list", "write [{\"name\": …, \"seqs\": [[ctx, q], …]}, …]")
    if len(raw) > MAX_CASES:
        raise InputError(f"suite {path} lists {len(raw):,} cases, past the limit of {MAX_CASES:,}",
                         "split it into suites of at most 1,000 cases")
    known = {f.name for f in fields(Case)}
    cases = []
    for i, obj in enumerate(raw):
        if not isinstance(obj, dict) or "seqs" not in obj:
            raise InputError(f"suite {path}: entry {i} has no \"seqs\"", "give [[ctx, n_q], …] per case")
        extra = set(obj) - known
        if extra:
            raise InputError(f"suite {path}: entry {i} has unknown fields {sorted(extra)}",
                             f"use only {', '.join(sorted(known))}")
        seqs = _seqs(obj["seqs"])
        if seqs is None:
            raise InputError(f"suite {path}: entry {i} seqs {obj['seqs']!r:.80} are not [ctx, n_q] "
                             "pairs of whole numbers", "write \"seqs\": [[37, 8], [5, 1]]")
        for key, value in obj.items():
            types = FIELD_TYPES.get(key)
            if types is not None and (not isinstance(value, types)
                                      or (isinstance(value, bool) and bool not in types)):
                want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                raise InputError(f"suite {path}: entry {i} field {key!r} is {value!r:.40}, not {want}",
                                 "give numbers as numbers, true/false unquoted (docs/kernels.md)")
        if not 0 <= obj.get("seed", 0) <= MAX_SEED:
            raise InputError(f"suite {path}: entry {i} seed {obj['seed']:.3g} is outside 0 to "
                             f"{MAX_SEED:,}", "pick a smaller seed")
        try:
            cases.append(Case(**{"name": f"case{i}", **obj, "seqs": seqs}))
        except TypeError as exc:  # a field of the wrong type ("heads_q": "8")
            raise InputError(f"suite {path}: entry {i}: {exc}",
                             "give numbers as numbers and names as strings (docs/kernels.md)") from exc
    return cases


