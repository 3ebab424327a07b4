"""What the ranks' taps say before a reduction makes every rank agree.

Case B's draft attention ran as if it were alone while its KV cache was sharded over
four ranks; the row-parallel projection after it all-reduced the wrong partials into a
hidden state that was bit-identical on every rank, so every check after the
reduction passed. These checks look at the taps before it, per (name, layer, step):

- zero-heads      a rank whose output has heads that are all zeros
- empty-indices   a rank whose top-k / index set holds no valid entry
- merge-skipped   the merged output is bit-identical to the rank's partial on a sharded KV
- world-size      ranks disagree on a world size, or the attention's world size is not
                  the number of shards its KV cache was written in
- local-seq-lens  per-rank sequence lengths that only add up to the context together
                  (6/6/5/5), fed to an attention that believes it is not sharded
- post-reduction  a tensor named "hidden" identical on every rank: reported, never
                  taken as evidence that the layer before it is right
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdoctor.experiments.taps.records import Record

OUTPUTS = ("out", "partial_out")


@dataclass
class RankCheck:
    """What one check saw in the taps of one (name, layer, step) (not a diagnosis ``Finding``:
    ``taps check`` prints these; the taps experiment decides from ``heads``)."""

    level: str  # "fault", "ok" or "note"
    check: str
    where: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


def _world(rec: Record, key: str) -> int | None:
    v = rec.meta.get(key)
    return int(v) if v is not None else None


def attention_world(rec: Record) -> int:
    """The world size the attention code ran with (meta `attn_world_size`, default 1)."""
    return _world(rec, "attn_world_size") or 1


def kv_world(rec: Record) -> int:
    """The number of shards the KV cache was written in (meta `kv_world_size`, default 1)."""
    return _world(rec, "kv_world_size") or 1


def zero_heads(rec: Record) -> list[RankCheck]:
    out = []
    for name in OUTPUTS:
        t = rec.tensors.get(name)
        if t is None or t.dim() != 3:
            continue
        zero = [h for h in range(t.shape[1]) if not bool(t[:, h].any())]
        if zero:
            out.append(RankCheck("fault", "zero-heads", rec.label,
                               f"{len(zero)} of {t.shape[1]} heads of {name} are all zeros (heads {zero})",
                               {"rank": rec.rank, "tensor": name, "heads": zero}))
    return out


def empty_indices(rec: Record) -> list[RankCheck]:
    out = []
    for name, t in rec.tensors.items():
        if "indices" in name and not bool((t >= 0).any()):
            out.append(RankCheck("fault", "empty-indices", rec.label,
                               f"{name} holds no valid index ({t.numel()} entries, none >= 0): "
                               "the attention read nothing", {"rank": rec.rank, "tensor": name}))
    return out


def merge_skipped(rec: Record) -> list[RankCheck]:
    import torch

    if kv_world(rec) <= 1 or not {"out", "partial_out"} <= set(rec.tensors):
        return []
    if torch.equal(rec.tensors["out"], rec.tensors["partial_out"]):
        return [RankCheck("fault", "merge-skipped", rec.label,
                        f"the merged output is bit-identical to this rank's partial while the KV is "
                        f"sharded over {kv_world(rec)} ranks: no merge ran", {"rank": rec.rank})]
    return []


def world_sizes(ranks: dict[int, Record], where: str) -> list[RankCheck]:
    out = []
    keys = sorted({k for r in ranks.values() for k in r.meta if k.endswith("world_size")})
    for key in keys:
        values = {r: ranks[r].meta.get(key) for r in sorted(ranks)}
        if len(set(map(str, values.values()))) > 1:
            out.append(RankCheck("fault", "world-size", where, f"ranks disagree on {key}: {values}",
                               {"key": key, "values": values}))
    for r in sorted(ranks):
        rec = ranks[r]
        if kv_world(rec) != attention_world(rec):
            out.append(RankCheck("fault", "world-size", rec.label,
                               f"attention ran with world size {attention_world(rec)} but its KV cache "
                               f"was written in {kv_world(rec)} shards", {"rank": r}))
    return out


def local_seq_lens(ranks: dict[int, Record], where: str) -> list[RankCheck]:
    if len(ranks) < 2 or not all("seqused_k" in r.tensors for r in ranks.values()):
        return []
    lens = {r: ranks[r].tensors["seqused_k"].tolist() for r in sorted(ranks)}
    if len({tuple(v) for v in lens.values()}) == 1:
        return []
    blind = [r for r in ranks if attention_world(ranks[r]) == 1]
    if not blind:
        return [RankCheck("note", "local-seq-lens", where,
                        f"per-rank sequence lengths {_fmt(lens)}: sharded, and the attention knows it")]
    return [RankCheck("fault", "local-seq-lens", where,
                    f"sequence lengths differ by rank ({_fmt(lens)}, together {_sum(lens)}): the KV is "
                    f"sharded, yet ranks {sorted(blind)} ran attention as if unsharded (world size 1)",
                    {"seqused_k": lens})]


def post_reduction(ranks: dict[int, Record], where: str) -> list[RankCheck]:
    import torch

    have = [r for r in sorted(ranks) if "hidden" in ranks[r].tensors]
    if len(have) < 2:
        return []
    first = ranks[have[0]].tensors["hidden"]
    same = all(torch.equal(first, ranks[r].tensors["hidden"]) for r in have[1:])
    if same:
        return [RankCheck("note", "post-reduction", where,
                        f"hidden is bit-identical on ranks {have}: consistent, which an all-reduce "
                        "guarantees even when the partials before it are wrong")]
    return [RankCheck("fault", "post-reduction", where, f"hidden differs between ranks {have}")]


def _fmt(lens: dict[int, list[int]]) -> str:
    per_seq = list(zip(*lens.values(), strict=True))
    return "; ".join("/".join(map(str, s)) for s in per_seq)


def _sum(lens: dict[int, list[int]]) -> str:
    return "/".join(str(sum(s)) for s in zip(*lens.values(), strict=True))
