"""Mask models of each attention backend, read from the engine's own code.

Every backend lists the lines it transcribes (anchors). `resolve` finds them in
a code root and derives the convention from what they say: FlashAttention's
`(sliding_window - 1, 0)` gives p = W-1, `_maybe_symmetrize_window` makes it
symmetric for non-causal layers, FlexAttention's `abs(q_idx - kv_idx) < W`
gives the edge operator, and so on. A convention the code does not show (a
compiled kernel) is stated as an assumption and is what `masks diff --check` tests.

    fa2     vllm/v1/attention/backends/flash_attn.py + FA's documented window contract
    flex    vllm/v1/attention/backends/flex_attention.py (mask_mod on logical positions)
    triton  vllm/v1/attention/backends/triton_attn.py + ops/triton_*attention*.py
    cpu     vllm/v1/attention/backends/cpu_attn.py (the window goes to the C++ kernel)
    sdpa    torch SDPA as a reference calls it: is_causal, or an explicit boolean mask
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from specdoctor.errors import InputError
from specdoctor.experiments.masks.cite import Anchor, Citation, CodeRoot
from specdoctor.experiments.masks.model import Convention, MaskSpec

FA = "vllm/v1/attention/backends/flash_attn.py"
FA_IFACE = "vllm/vllm_flash_attn/flash_attn_interface.py"
FLEX = "vllm/v1/attention/backends/flex_attention.py"
TRITON = "vllm/v1/attention/backends/triton_attn.py"
TRITON_OPS = "vllm/v1/attention/ops/triton_unified_attention.py"
TRITON_HELPERS = "vllm/v1/attention/ops/triton_attention_helpers.py"
CPU = "vllm/v1/attention/backends/cpu_attn.py"
TORCH_F = "torch/nn/functional.py"

_WINDOW_TUPLE = r"self\.sliding_window\s*=\s*\(\s*sliding_window(\s*-\s*1)?\s*,\s*0\s*\)"


@dataclass
class Resolved:
    """A backend's mask model for one code root: the convention and where it came from."""

    impl: str
    convention: Convention
    citations: list[Citation]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Backend:
    impl: str
    summary: str
    anchors: tuple[Anchor, ...]
    derive: Callable[[dict[str, Citation], MaskSpec, list[str]], Convention]


def _group(c: Citation, i: int = 0) -> str | None:
    return c.groups[i] if c.found and len(c.groups) > i else None


def _fa2(cites: dict[str, Citation], spec: MaskSpec, notes: list[str]) -> Convention:
    arg = cites["window_arg"]
    window_arg = "W-1" if _group(arg) else "W"
    if not arg.found:
        notes.append("window tuple not found; assuming (W-1, 0)")
        window_arg = "W-1"
    symmetrised = cites["symmetrize"].found and cites["symmetrize_call"].found
    sides = "symmetric" if (symmetrised and not spec.causal) else "one-sided"
    if not spec.causal and not symmetrised:
        notes.append("no (w,0)->(w,w) symmetrisation in this code: non-causal layers lose the future")
    if not cites["inclusive"].found:
        notes.append("FA window contract not in this code root; using FA's documented inclusive bounds")
    return Convention(window_arg, sides, "<=", "bottom-right")


def _flex(cites: dict[str, Citation], spec: MaskSpec, notes: list[str]) -> Convention:
    edge = _group(cites["window"]) or "<"
    if not cites["window"].found:
        notes.append("sliding_window_mask_mod not found; assuming abs(q - kv) < W")
    if not cites["logical_q"].found:
        notes.append("logical query offset not found; assuming absolute positions")
    return Convention("W", "symmetric", edge, "bottom-right")


def _triton(cites: dict[str, Citation], spec: MaskSpec, notes: list[str]) -> Convention:
    minus_one = bool(_group(cites["window_arg"])) or not cites["window_arg"].found
    plus_one = cites["plus_one"].found
    window_arg = "W" if minus_one == plus_one else ("W-1" if minus_one else "W")
    edge = _group(cites["left"]) or "<"
    if not cites["left"].found:
        notes.append("kernel window test not found; assuming (q - k) < SLIDING_WINDOW")
    sides = "symmetric" if cites["right"].found else "left-only"
    return Convention(window_arg, sides, edge, "bottom-right")


def _cpu(cites: dict[str, Citation], spec: MaskSpec, notes: list[str]) -> Convention:
    notes.append("the C++ kernel's window test is compiled code: symmetric |q - k| < W is the "
                 "model; `masks diff --check` compares it with the op")
    return Convention("W", "symmetric", "<", "bottom-right")


def _sdpa(cites: dict[str, Citation], spec: MaskSpec, notes: list[str]) -> Convention:
    if spec.window is None and spec.causal:
        notes.append("is_causal=True: torch aligns the causal mask top-left")
        return Convention("W", "symmetric", "<", "top-left")
    notes.append("explicit boolean mask built by the caller (SDPA has no window and no "
                 "is_causal together with a mask)")
    return Convention("W", "symmetric", "<", "bottom-right")


BACKENDS: dict[str, Backend] = {b.impl: b for b in (
    Backend("fa2", "FlashAttention (vLLM flash_attn backend)", (
        Anchor("window_arg", FA, _WINDOW_TUPLE),
        Anchor("symmetrize", FA, r"return\s*\(\s*window\[0\]\s*,\s*window\[0\]\s*\)"),
        Anchor("symmetrize_call", FA, r"_maybe_symmetrize_window\(\s*self\.sliding_window"),
        Anchor("inclusive", FA_IFACE, r"window_size\[1\]\]\s*(inclusive)"),
    ), _fa2),
    Backend("flex", "FlexAttention (vLLM flex_attention backend)", (
        Anchor("window", FLEX, r"torch\.abs\(\s*q_idx\s*-\s*kv_idx\s*\)\s*(<=?)\s*self\.sliding_window"),
        Anchor("causal", FLEX, r"return\s+q_idx\s*>=\s*kv_idx"),
        Anchor("logical_q", FLEX, r"logical_q_idx\s*=\s*local_q_idx\s*\+\s*self\.decode_offset"),
    ), _flex),
    Backend("triton", "Triton unified attention (vLLM triton_attn backend)", (
        Anchor("window_arg", TRITON, _WINDOW_TUPLE),
        Anchor("plus_one", TRITON_OPS, r"SLIDING_WINDOW\s*=\s*\(\s*1\s*\+\s*window_size\[0\]\s*\)"),
        Anchor("left", TRITON_HELPERS, r"sw_left\s*=\s*\(query_abs_pos\s*-\s*seq_offset\)\s*(<=?)\s*SLIDING_WINDOW"),
        Anchor("right", TRITON_HELPERS, r"sw_right\s*=\s*\(seq_offset\[None, :\]\s*-\s*query_abs_pos\)\s*(<=?)\s*SLIDING_WINDOW"),
    ), _triton),
    Backend("cpu", "vLLM CPU attention (cpu_attn backend, C++ kernel)", (
        Anchor("window_arg", CPU, r"self\.sliding_window\s*=\s*sliding_window\s*$"),
        Anchor("kernel_call", CPU, r"sliding_window\s*=\s*self\.sliding_window"),
    ), _cpu),
    Backend("sdpa", "torch scaled_dot_product_attention as a reference uses it", (
        Anchor("is_causal", TORCH_F, r"\.tril\(diagonal=0\)"),
    ), _sdpa),
)}


def parse_convention(text: str) -> tuple[str, Convention]:
    """`IMPL=ARG,SIDES,EDGE[,ALIGN]`, e.g. `fa2=W,symmetric,<=`."""
    impl, sep, rest = text.partition("=")
    parts = [p.strip() for p in rest.split(",")]
    if not sep or impl not in BACKENDS or len(parts) not in (3, 4):
        raise InputError(f"cannot read --convention {text!r}",
                         "write IMPL=W|W-1,one-sided|symmetric|left-only,<|<=[,bottom-right|top-left]")
    try:
        return impl, Convention(*parts)
    except ValueError as exc:
        raise InputError(f"--convention {text!r}: {exc}", "see `specdoctor masks diff --help`") from exc


def resolve(impl: str, spec: MaskSpec, code: CodeRoot,
            override: Convention | None = None) -> Resolved:
    backend = BACKENDS.get(impl)
    if backend is None:
        raise InputError(f"unknown attention implementation {impl!r}",
                         f"use any of {', '.join(BACKENDS)}")
    cites = {a.key: code.cite(a) for a in backend.anchors}
    notes: list[str] = []
    conv = backend.derive(cites, spec, notes)
    if override is not None:
        notes.append(f"convention set by --convention (code says: {conv.describe()})")
        conv = override
    elif spec.window is None:
        conv = replace(conv)  # the window conventions do not matter without a window
    return Resolved(impl, conv, list(cites.values()), notes)


def reference_mask(impl: str, spec: MaskSpec, ctx: int, n: int, code: CodeRoot | None = None,
                   override: Convention | None = None) -> object:
    """The (n, ctx+n) numpy bool mask backend `impl` applies: the reference for kernel checks."""
    from specdoctor.experiments.masks.model import mask_array

    model = resolve(impl, spec, code or CodeRoot(None), override)
    return mask_array(model.convention, spec, ctx, n)
