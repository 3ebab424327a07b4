"""A runtime patch of vLLM's CPU attention for the draft's layers only (standard library + torch).

The draft's layers come from the proposer, as vLLM itself finds them: after
``SpecDecodeBaseProposer.load_model`` (the loader of every model-based drafter: draft_model,
EAGLE/EAGLE3, DFlash, MTP) the proposer holds the attention layers its draft model added in
``_draft_attn_layer_names``; ``proposer_loaded`` keeps that set (and says nothing).
After the real ``CPUAttentionBackendImpl.forward`` ran, a draft layer (one of those names; the
target's layers are never touched) keeps only one head in every ``EVERY`` on the part of the
context that one rank of
``SHARDS`` would not hold: for every query token at a position past the first ``1/SHARDS`` of
its sequence, heads ``h`` with ``h % EVERY != 0`` get an output of zeros. That is what an
attention sees when it reads a context-parallel shard as if it were the whole cache and the
heads of the other ranks never arrive. Nothing raises; the output buffer is edited in place,
as the kernel writes it.

Loaded by the probe runtime: ``proposer_loaded(call)`` as a handler after ``load_model``, and
``forward(original, self, layer, query, key, value, kv_cache, attn_metadata, output, ...)`` as a
``replace`` of the attention.
"""

import torch

EVERY = 4
SHARDS = 4


def lost_mask(query_start_loc, seq_lens, num_heads, every=EVERY, shards=SHARDS):
    """(tokens, heads) bool: True where the output is zeroed. Token t of request i sits at
    position seq_lens[i] - q_len_i + j; it is past the first shard when that position is at
    least ceil(seq_lens[i] / shards)."""
    qsl = query_start_loc.to(torch.int64)
    q_lens = qsl[1:] - qsl[:-1]
    n = int(qsl[-1])
    seq = seq_lens.to(torch.int64)[: q_lens.numel()]
    req = torch.repeat_interleave(torch.arange(q_lens.numel()), q_lens)
    offset = torch.arange(n) - qsl[:-1][req]
    position = seq[req] - q_lens[req] + offset
    local = (seq + shards - 1) // shards
    past = position >= local[req]
    lost_head = torch.arange(num_heads) % every != 0
    return past[:, None] & lost_head[None, :]


def zero_lost(output, query_start_loc, seq_lens, num_heads, head_size):
    """Zero the lost heads of ``output`` ((tokens, heads*head_size) or (tokens, heads,
    head_size)) in place; returns the mask."""
    mask = lost_mask(query_start_loc, seq_lens, num_heads)
    n = mask.shape[0]
    view = output[:n].view(n, num_heads, head_size)
    view.masked_fill_(mask[:, :, None], 0)
    return mask


DRAFT_LAYERS = set()


def proposer_loaded(call):
    DRAFT_LAYERS.update(str(n) for n in getattr(call.self, "_draft_attn_layer_names", None) or ())
    return None


def forward(original, self, layer, query, key, value, kv_cache, attn_metadata, output=None,
            *args, **kwargs):
    result = original(self, layer, query, key, value, kv_cache, attn_metadata, output,
                      *args, **kwargs)
    if attn_metadata is None or str(getattr(layer, "layer_name", "")) not in DRAFT_LAYERS:
        return result
    zero_lost(output, attn_metadata.query_start_loc, attn_metadata.seq_lens,
              self.num_heads, self.head_size)
    return result
