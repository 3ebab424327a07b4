"""Attention recomputed in fp64 from what a tap dumped, and compared with what the kernel wrote.

A record holds q (T, H_q, D), the K/V pages (num_blocks, block_size, H_kv, D), the
block table, seqused_k and cu_seqlens_q of that step, and the kernel's output ("out",
or "partial_out" for one rank's share). fp8 pages are dequantized with the dumped
k_scale / v_scale (a scalar or one value per KV head); fp8 pages without scales are an
error, not a guess. Mask: the layer's own, as the engine resolved it: meta `layer_causal`
where the model resolves causality per layer (a DFlash drafter), else `causal`, the flag the
kernel was given (default true), and `window` (the layer's W, default none), applied as the
layer intends (bottom-right causal, |q - k| < W on both sides); meta `scale` defaults to
D^-0.5. A record whose kernel also applied what this recomputation does not model
(per-sequence `dynamic_causal` offsets, attention sinks, ALiBi, a soft cap) is refused with
that said, never judged. Trust: cosine >= 0.9999 (the bar Case B validated its tap at).

For KV sharded across ranks (meta `kv_world_size` > 1, `kv_layout` "interleave": slot j
of rank r holds position j * world + r, as decode context parallelism stores it), the
ranks' pages are put back together and each rank's output is compared with attention
over the whole context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specdoctor.errors import InputError
from specdoctor.experiments.kernels.inputs import Paged, gather, validate
from specdoctor.experiments.kernels.reference import attention
from specdoctor.experiments.masks.model import Convention, MaskSpec, mask_array
from specdoctor.experiments.taps.records import Record

TRUST_COSINE = 0.9999


@dataclass
class Comparison:
    what: str
    cosine: float
    rel_err: float  # ||out - ref|| / ||ref||
    max_abs: float

    @property
    def trusted(self) -> bool:
        return self.cosine >= TRUST_COSINE  # NaN compares false: never trusted


def compare(out: Any, ref: Any, what: str) -> Comparison:
    import torch

    o, r = out.to(torch.float64).flatten(), ref.to(torch.float64).flatten()
    if o.shape != r.shape:
        raise InputError(f"{what}: output has {out.numel()} values, the recomputation {ref.numel()}",
                         "tap the output of the same call as q and the pages")
    if not bool(torch.isfinite(o).all()):
        return Comparison(what, math.nan, math.inf, math.inf)
    no, nr = float(o.norm()), float(r.norm())
    if no == 0 and nr == 0:
        cos = 1.0
    elif no == 0 or nr == 0:
        cos = 0.0
    else:
        cos = float(o @ r) / (no * nr)
    rel = float((o - r).norm()) / nr if nr else (0.0 if no == 0 else math.inf)
    return Comparison(what, cos, rel, float((o - r).abs().max()) if o.numel() else 0.0)


def _dequant(rec: Record, which: str) -> Any:
    import torch

    (cache,) = rec.need(f"{which}_cache")
    if "float8" not in str(cache.dtype):
        return cache.to(torch.float64)
    scale_name = f"{which}_scale"
    if scale_name not in rec.tensors:
        raise InputError(f"{rec.path.name}: {which}_cache is {cache.dtype} but no {scale_name} was tapped",
                         f"tap {scale_name} (layer._{which}_scale) beside the pages to dequantize them")
    scale = rec.tensors[scale_name].to(torch.float64)
    if scale.numel() > 1:  # one scale per KV head
        scale = scale.reshape(1, 1, -1, 1)
    return cache.to(torch.float64) * scale


def layer_causal(rec: Record) -> bool:
    """The layer's own causality: the model's per-layer resolution where tapped, else the flag
    the kernel was given."""
    meta = rec.meta
    return bool(meta["layer_causal"] if meta.get("layer_causal") is not None
                else meta.get("causal", True))


def mask_disagreement(rec: Record) -> str | None:
    """Where the kernel was given another causal flag than the layer resolves (pure)."""
    given, own = rec.meta.get("causal"), rec.meta.get("layer_causal")
    if given is None or own is None or bool(given) == bool(own):
        return None
    return (f"{rec.label}: the kernel was given causal={bool(given)} where the layer resolves "
            f"causal={bool(own)}")


def unmodelled(rec: Record) -> str | None:
    """What the kernel applied that the fp64 recomputation does not model, or None."""
    if "dynamic_causal" in rec.tensors:
        return "per-sequence causal offsets (dynamic_causal)"
    for key, what in (("sinks", "attention sinks"), ("alibi", "ALiBi slopes")):
        if rec.meta.get(key):
            return what
    if float(rec.meta.get("softcap") or 0.0):
        return f"a logits soft cap ({rec.meta['softcap']})"
    return None


def paged(rec: Record) -> Paged:
    """The record as a kernel call (pages dequantized to fp64, the layer's own mask), validated."""
    import torch

    extra = unmodelled(rec)
    if extra is not None:
        raise InputError(f"{rec.path.name} ({rec.label}): the kernel also applied {extra}, which "
                         f"the fp64 recomputation does not model",
                         "compare such a layer with its engine's own reference instead")
    q, bt, used, cu = rec.need("q", "block_table", "seqused_k", "cu_seqlens_q")
    k, v = _dequant(rec, "k"), _dequant(rec, "v")
    p = Paged(q=q, k_cache=k, v_cache=v, cu_seqlens_q=cu.to(torch.int64), seqused_k=used.to(torch.int64),
              block_table=bt.to(torch.int64), scale=float(rec.meta.get("scale") or q.shape[-1] ** -0.5),
              causal=layer_causal(rec), window=rec.meta.get("window"),
              k_logical=[], v_logical=[])
    validate(p, rec.path.name)
    return p


def _attend(q: Any, k: Any, v: Any, causal: bool, window: int | None, scale: float) -> Any:
    import torch

    n, length = q.shape[0], k.shape[0]
    mask = torch.from_numpy(mask_array(Convention(), MaskSpec(window, causal), length - n, n).copy())
    return attention(q.to(torch.float64), k, v, mask, scale)


def reference(rec: Record, out_name: str = "out") -> tuple[Any, Any]:
    """(the kernel's output, fp64 attention over this record's own pages), both (T, H_q, D)."""
    import torch

    p = paged(rec)
    (out,) = rec.need(out_name)
    cu = p.cu_seqlens_q.tolist()
    ref = torch.empty(p.q.shape, dtype=torch.float64)
    for s, n in enumerate(p.seqused_k.tolist()):
        k, v = gather(p.k_cache, p.block_table[s], n), gather(p.v_cache, p.block_table[s], n)
        ref[cu[s]:cu[s + 1]] = _attend(p.q[cu[s]:cu[s + 1]], k, v, p.causal, p.window, p.scale)
    return out, ref


def recompute(rec: Record, out_name: str = "out") -> Comparison:
    """The kernel's output against fp64 attention over this record's own pages."""
    out, ref = reference(rec, out_name)
    return compare(out, ref, f"{rec.label}: {out_name} vs fp64 over its own pages")


def global_kv(ranks: dict[int, Record], world: int) -> tuple[list[Any], list[Any]]:
    """Per sequence, the whole context's K and V put back together from interleaved shards."""
    import torch

    shards = [paged(ranks[r]) for r in range(world)]
    ks, vs = [], []
    for s in range(shards[0].seqused_k.numel()):
        lens = [int(sh.seqused_k[s]) for sh in shards]
        total = sum(lens)
        k = torch.empty(total, *shards[0].k_cache.shape[2:], dtype=torch.float64)
        v = torch.empty_like(k)
        for r, sh in enumerate(shards):
            k[r::world] = gather(sh.k_cache, sh.block_table[s], lens[r])
            v[r::world] = gather(sh.v_cache, sh.block_table[s], lens[r])
        ks.append(k)
        vs.append(v)
    return ks, vs


def recompute_global(ranks: dict[int, Record], rank: int, world: int, out_name: str = "out") -> Comparison:
    """One rank's output against fp64 attention over the whole (un-sharded) context."""
    import torch

    ks, vs = global_kv(ranks, world)
    rec = ranks[rank]
    p = paged(rec)
    (out,) = rec.need(out_name)
    cu = p.cu_seqlens_q.tolist()
    ref = torch.empty(p.q.shape, dtype=torch.float64)
    for s in range(len(ks)):
        ref[cu[s]:cu[s + 1]] = _attend(p.q[cu[s]:cu[s + 1]], ks[s], vs[s], p.causal, p.window, p.scale)
    return compare(out, ref, f"{rec.label}: {out_name} vs fp64 over the whole context ({world} shards)")
