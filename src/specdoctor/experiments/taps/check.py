"""`taps check`: every record recomputed in fp64, then the cross-rank checks, as one list of findings.

Per record with q, pages and metadata: its output against attention over its own pages, with
the layer's own mask (the tap and the kernel are trusted at cosine >= 0.9999); a kernel given
another causal flag than its layer resolves is a fault of its own ("mask"); a record whose
kernel applied what the recomputation does not model (sinks, ALiBi, a soft cap, per-sequence
causal offsets) is a note, not judged. Per (name, layer, step) whose
KV was sharded over several ranks, with every rank present: each rank's merged output
against attention over the whole context, put back together from all ranks' pages.
Then the cross-rank checks (crossrank.py). Faults make the verdict; notes inform.
"""

from __future__ import annotations

from pathlib import Path

from specdoctor.experiments.taps.attention import (
    mask_disagreement,
    recompute,
    recompute_global,
    unmodelled,
)
from specdoctor.experiments.taps.crossrank import (
    RankCheck,
    empty_indices,
    kv_world,
    local_seq_lens,
    merge_skipped,
    post_reduction,
    world_sizes,
    zero_heads,
)
from specdoctor.experiments.taps.records import Record, by_step, load_dir

PAGES = ("q", "k_cache", "v_cache", "block_table", "seqused_k", "cu_seqlens_q")


def _is_attention(rec: Record) -> bool:
    return any(k in rec.tensors for k in PAGES) or rec.name.startswith("attn")


def _recompute(rec: Record) -> list[RankCheck]:
    out = []
    local = "partial_out" if "partial_out" in rec.tensors else ("out" if kv_world(rec) <= 1 else None)
    if local is None:
        return out
    extra = unmodelled(rec)
    if extra is not None:
        return [RankCheck("note", "recompute", rec.label,
                          f"not recomputed: the kernel also applied {extra}, which the fp64 "
                          f"recomputation does not model")]
    mismatch = mask_disagreement(rec)
    if mismatch is not None:
        out.append(RankCheck("fault", "mask", rec.label, mismatch))
    c = recompute(rec, local)
    level = "ok" if c.trusted else "fault"
    out.append(RankCheck(level, "recompute", rec.label,
                       f"{local} vs fp64 over its own pages: cosine {c.cosine:.6f}, rel err {c.rel_err:.2e}"
                       + ("" if c.trusted else " — below 0.9999: the kernel (or the tap) is wrong here"),
                       {"cosine": c.cosine, "rel_err": c.rel_err, "max_abs": c.max_abs}))
    return out


def _recompute_global(ranks: dict[int, Record], where: str) -> list[RankCheck]:
    first = next(iter(ranks.values()))
    world = kv_world(first)
    if world <= 1 or "out" not in first.tensors:
        return []
    if sorted(ranks) != list(range(world)):
        return [RankCheck("note", "recompute-global", where,
                        f"KV sharded over {world} ranks but taps came from ranks {sorted(ranks)}: "
                        "the whole context cannot be put back together")]
    out = []
    for r in sorted(ranks):
        c = recompute_global(ranks, r, world)
        ok = c.trusted
        out.append(RankCheck("ok" if ok else "fault", "recompute-global", ranks[r].label,
                           f"out vs fp64 over the whole context ({world} shards): cosine {c.cosine:.6f}, "
                           f"rel err {c.rel_err:.2e}" + ("" if ok else " — this rank's output is not "
                                                         "attention over the whole context"),
                           {"cosine": c.cosine, "rel_err": c.rel_err}))
    return out


def check_records(records: list[Record]) -> list[RankCheck]:
    findings: list[RankCheck] = []
    for (name, layer, step), ranks in sorted(by_step(records).items()):
        where = f"{name} layer {layer} step {step}"
        for r in sorted(ranks):
            rec = ranks[r]
            if _is_attention(rec):
                findings += _recompute(rec)
            findings += zero_heads(rec) + empty_indices(rec) + merge_skipped(rec)
        if any(_is_attention(r) for r in ranks.values()):
            findings += _recompute_global(ranks, where)
            findings += world_sizes(ranks, where) + local_seq_lens(ranks, where)
        findings += post_reduction(ranks, where)
    return findings


def check_dir(directory: Path) -> list[RankCheck]:
    return check_records(load_dir(directory))
