"""Attention masks as pure functions: which key each query position may see.

Positions are absolute: a step with `ctx` tokens already in the KV cache and `n`
new query tokens has queries at ctx+i (i < n) and keys at [0, ctx+n). A backend's
mask is fixed by four conventions, the things that changed between vLLM versions:

- `window_arg`: what the engine hands the kernel for a model window W — W or W-1;
- `sides`: "one-sided" (the kernel is given (p, 0): keys after the query are hidden,
  even when the layer is non-causal), "symmetric" (p on both sides) or "left-only"
  (only the past is bounded; a non-causal query sees every later key);
- `edge`: how the kernel compares the distance with p — "<" or "<=";
- `causal_align`: "bottom-right" (the last query sees the last key: FlashAttention,
  every paged vLLM backend) or "top-left" (query i sees keys <= i: SDPA's is_causal).

`visible` is written with comparisons and `&` only, so the same function runs on
Python ints (the reference) and on numpy or torch arrays (whole matrices at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WINDOW_ARGS = ("W", "W-1")
SIDES = ("one-sided", "symmetric", "left-only")
EDGES = ("<", "<=")
ALIGNS = ("bottom-right", "top-left")


@dataclass(frozen=True)
class Convention:
    window_arg: str = "W"
    sides: str = "symmetric"
    edge: str = "<"
    causal_align: str = "bottom-right"

    def __post_init__(self) -> None:
        for value, allowed in ((self.window_arg, WINDOW_ARGS), (self.sides, SIDES),
                               (self.edge, EDGES), (self.causal_align, ALIGNS)):
            if value not in allowed:
                raise ValueError(f"{value!r} is not one of {allowed}")

    def describe(self) -> str:
        return f"window {self.window_arg}, {self.sides}, dist {self.edge} p, causal {self.causal_align}"


@dataclass(frozen=True)
class MaskSpec:
    """What the model asks for: a window W (None = full attention) and causality."""

    window: int | None
    causal: bool

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 1:
            raise ValueError("window must be >= 1")


def visible(conv: Convention, spec: MaskSpec, q: Any, k: Any, ctx: Any, n: int) -> Any:
    """True where query position q may attend to key position k (both absolute)."""
    seq_len = ctx + n
    ok = (k >= 0) & (k < seq_len)
    if spec.causal:
        # bottom-right: query ctx+i sees keys <= ctx+i; top-left: keys <= i.
        limit = q if conv.causal_align == "bottom-right" else q - ctx
        ok = ok & (k <= limit)
    if spec.window is not None:
        p = spec.window if conv.window_arg == "W" else spec.window - 1
        dist = q - k
        left = (dist < p) if conv.edge == "<" else (dist <= p)
        if conv.sides == "symmetric":
            ok = ok & ((-dist < p) if conv.edge == "<" else (-dist <= p))
        elif conv.sides == "one-sided":
            ok = ok & (dist >= 0)  # the kernel got (p, 0): nothing after the query
        ok = ok & left
    return ok


def mask_rows(conv: Convention, spec: MaskSpec, ctx: int, n: int) -> list[list[bool]]:
    """The n x (ctx+n) mask in plain Python: the reference the vectorised path must match."""
    return [[bool(visible(conv, spec, ctx + i, k, ctx, n)) for k in range(ctx + n)]
            for i in range(n)]


def mask_array(conv: Convention, spec: MaskSpec, ctx: int, n: int) -> Any:
    """The same mask as a numpy bool array (n, ctx+n)."""
    import numpy as np

    q = ctx + np.arange(n)[:, None]
    k = np.arange(ctx + n)[None, :]
    out = visible(conv, spec, q, k, ctx, n)
    return np.broadcast_to(out, (n, ctx + n)).astype(bool)


def render(rows: Any) -> list[str]:
    """Rows as strings of '1' (visible) and '.' (masked)."""
    return ["".join("1" if bit else "." for bit in row) for row in rows]
