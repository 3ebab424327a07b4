"""Run a suite: inputs per case, one fp64 reference per mask convention, every adapter, the control.

Verdict: ok only when every available adapter passes every case AND the negative
control (SDPA with its query positions shifted by one) fails on every "edge" case where
its mask differs from the true one. A control that passes would mean the data cannot
see a one-key mask error, so nothing else the run says could be trusted.
Errors: max |out - ref| (the tolerance applies to it), relative = max abs / max |ref|,
and the worst position (sequence, absolute query position, head, dim). NaN or inf in an
output is an infinite error: it never passes.

Cause: when a case fails, the output is compared with the references of the usual mask
mistakes (``SUSPECTS``: causal aligned top-left, the window one key wider or narrower, the
window ignored, a non-causal layer served causal). One that the output matches within the
tolerance, where the true reference does not, is named as the cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from specdoctor.experiments.kernels.adapters import Adapter, control, window_param
from specdoctor.experiments.kernels.cases import TOLERANCES, Case
from specdoctor.experiments.kernels.inputs import Paged, build, validate
from specdoctor.experiments.kernels.reference import paged_reference
from specdoctor.experiments.masks.backends import resolve
from specdoctor.experiments.masks.cite import CodeRoot
from specdoctor.experiments.masks.model import Convention, MaskSpec, mask_array, visible

Mask = tuple[Convention, MaskSpec]

# The usual mask mistakes: (name, what it means, the mistaken mask from the true one or None
# where it is no mistake for this layer).
SUSPECTS: tuple[tuple[str, str, Callable[[Convention, MaskSpec], Mask | None]], ...] = (
    ("top-left causal", "the causal mask is aligned top-left (query i of a step sees keys 0..i, "
     "as SDPA's is_causal) where a cached context needs bottom-right (query ctx+i sees keys up "
     "to ctx+i): align it to the end of the keys",
     lambda c, m: (replace(c, causal_align="top-left"), m) if m.causal else None),
    ("window one key wider", "the window admits one key more on each side than |q - k| < W",
     lambda c, m: (c, MaskSpec(m.window + 1, m.causal)) if m.window else None),
    ("window one key narrower", "the window admits one key less on each side than |q - k| < W",
     lambda c, m: (c, MaskSpec(m.window - 1, m.causal)) if m.window and m.window > 1 else None),
    ("window ignored", "the layer's sliding window is not applied",
     lambda c, m: (c, MaskSpec(None, m.causal)) if m.window else None),
    ("non-causal layer served causal", "keys after the query are hidden from a non-causal layer",
     lambda c, m: (c, MaskSpec(m.window, True)) if not m.causal else None),
)


@dataclass
class Result:
    impl: str
    case: str
    dtype: str
    tol: float
    max_abs: float
    max_rel: float
    worst: dict[str, int] | None
    seconds: float
    error: str | None = None  # the adapter raised or returned the wrong shape
    cause: str | None = None  # a suspect (SUSPECTS) the failing output matches: "name: meaning"

    @property
    def ok(self) -> bool:
        return self.error is None and self.max_abs <= self.tol


@dataclass
class ControlCase:
    case: str
    mask_differs: bool  # the shifted mask differs from the true one here
    edge_data: bool  # data built to see one-key mask errors
    failed: bool
    max_abs: float

    @property
    def must_fail(self) -> bool:
        return self.mask_differs and self.edge_data


@dataclass
class Report:
    device: str
    suite: str
    cases: list[Case]
    adapters: list[Adapter]
    results: list[Result] = field(default_factory=list)
    control: list[ControlCase] = field(default_factory=list)
    reference_seconds: float = 0.0
    build_seconds: float = 0.0
    total_seconds: float = 0.0

    @property
    def ran(self) -> list[Adapter]:
        return [a for a in self.adapters if a.unavailable is None]

    @property
    def control_caught(self) -> bool:
        must = [c for c in self.control if c.must_fail]
        return bool(must) and all(c.failed for c in must)

    @property
    def ok(self) -> bool:
        return bool(self.ran) and all(r.ok for r in self.results) and self.control_caught


def compare(out: Any, ref: Any, p: Paged) -> tuple[float, float, dict[str, int] | None]:
    """(max abs error, max abs / max |ref|, worst position); non-finite outputs are infinite errors."""
    import torch

    diff = (out.to(ref.dtype) - ref).abs()
    bad = ~torch.isfinite(out)
    if bool(bad.any()):
        diff = diff.masked_fill(bad, float("inf"))
    flat = int(torch.argmax(torch.nan_to_num(diff, nan=float("inf"))))
    max_abs = float(diff.flatten()[flat])
    scale = float(ref.abs().max())
    token, rest = divmod(flat, ref.shape[1] * ref.shape[2])
    head, dim = divmod(rest, ref.shape[2])
    cu = p.cu_seqlens_q.tolist()
    seq = max(s for s in range(len(cu) - 1) if cu[s] <= token)
    ctx, _ = p.seqs[seq]
    worst = {"seq": seq, "q_pos": ctx + token - cu[seq], "head": head, "dim": dim}
    return max_abs, (max_abs / scale if scale > 0 else max_abs), worst


def _shifted_differs(case: Case) -> bool:
    import numpy as np

    spec = MaskSpec(case.window, case.causal)
    conv = control().convention or Convention()
    for ctx, n in case.seqs:
        q = ctx + np.arange(n)[:, None]
        k = np.arange(ctx + n)[None, :]
        true = np.broadcast_to(visible(conv, spec, q, k, ctx, n), (n, ctx + n))
        if (true != np.broadcast_to(visible(conv, spec, q + 1, k, ctx, n), (n, ctx + n))).any():
            return True
    return False


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _call(a: Adapter, p: Paged) -> Any:
    return a.fn(p.q, p.k_cache, p.v_cache, cu_seqlens_q=p.cu_seqlens_q, seqused_k=p.seqused_k,
                block_table=p.block_table, scale=p.scale, causal=p.causal,
                window=window_param(a.window_form, p.window, p.causal))


def reference_convention(a: Adapter, spec: MaskSpec, code: CodeRoot) -> Convention:
    """The convention of `a`'s reference: fixed (user functions: the model's mask), else its
    backend's mask model as the engine's code under `code` gives it."""
    return a.convention or resolve(a.mask_convention, spec, code).convention


def _masks(mask: Mask, case: Case) -> list[Any]:
    conv, spec = mask
    return [mask_array(conv, spec, ctx, n) for ctx, n in case.seqs]


def suspect(out: Any, truth: Mask, case: Case, tol: float, reference: Callable[[Mask], Any],
            p: Paged) -> str | None:
    """The first usual mask mistake whose reference the failing ``out`` matches within ``tol``."""
    want = b"".join(m.tobytes() for m in _masks(truth, case))
    for name, meaning, mistake in SUSPECTS:
        alt = mistake(*truth)
        if alt is None or b"".join(m.tobytes() for m in _masks(alt, case)) == want:
            continue
        if compare(out, reference(alt), p)[0] <= tol:
            return f"{name}: {meaning}"
    return None


def check(cases: list[Case], adapters: list[Adapter], device: str, suite: str = "",
          tolerances: dict[str, float] | None = None,
          progress: Callable[[str], None] = lambda _: None,
          reference_dtype: str = "float64") -> Report:
    import torch

    tols = {**TOLERANCES, **(tolerances or {})}
    ctl = control()
    code = CodeRoot(None)  # the installed engine's code
    report = Report(device, suite, cases, adapters)
    t_all = time.perf_counter()
    for i, case in enumerate(cases):
        progress(f"[{i + 1}/{len(cases)}] {case.name}")
        t0 = time.perf_counter()
        p = build(case, device)
        validate(p, f"case {case.name}")
        _sync(device)
        report.build_seconds += time.perf_counter() - t0
        spec = MaskSpec(case.window, case.causal)
        refs: dict[bytes, Any] = {}

        def reference(mask: Mask) -> Any:
            masks = _masks(mask, case)
            key = b"".join(m.tobytes() for m in masks)
            if key not in refs:
                t = time.perf_counter()
                refs[key] = paged_reference(p, masks, device, reference_dtype)
                _sync(device)
                report.reference_seconds += time.perf_counter() - t
            return refs[key]

        for a in [*report.ran, ctl]:
            truth = (reference_convention(a, spec, code), spec)
            ref = reference(truth)
            t = time.perf_counter()
            error = None
            try:
                with torch.no_grad():
                    out = _call(a, p)
                _sync(device)
                if tuple(out.shape) != tuple(p.q.shape):
                    error = f"returned shape {tuple(out.shape)}, expected {tuple(p.q.shape)}"
            except Exception as exc:  # a crashing kernel is a failing kernel, reported as such
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            secs = time.perf_counter() - t
            if error is None:
                max_abs, max_rel, worst = compare(out, ref, p)
            else:
                max_abs, max_rel, worst = float("inf"), float("inf"), None
            r = Result(a.name, case.name, case.dtype, tols[case.dtype], max_abs, max_rel, worst,
                       secs, error)
            if a is ctl:
                report.control.append(ControlCase(case.name, _shifted_differs(case),
                                                  case.data == "edge", not r.ok, max_abs))
            else:
                if error is None and not r.ok:
                    r.cause = suspect(out, truth, case, r.tol, reference, p)
                report.results.append(r)
    report.total_seconds = time.perf_counter() - t_all
    return report
