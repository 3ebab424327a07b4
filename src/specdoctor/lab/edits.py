"""Edits of a drafter's served files that stand for real mistakes (pure functions of a model
directory, done in place on a copy): the lab's llama.cpp faults and the clinic's cases use
them alike.

- ``permute_vocab_block``: a drafter re-indexed on one block of its vocabulary (tokenizer and
  embedding/lm_head rows alike): a drafter of another vocabulary revision.
- ``add_noise``: every matrix of the drafter with seeded Gaussian noise of a share of its own
  scale: a damaged drafter (a bad conversion, a corrupted download).
"""

from __future__ import annotations

import json
from pathlib import Path


def permute_vocab_block(d: Path, lo: int = 256, hi: int = 512, seed: int = 7) -> None:
    """A draft model re-indexed on one block of its vocabulary: the non-special tokens whose
    ids lie in [lo, hi) are given each other's ids, in its tokenizer.json and in the rows of
    its embedding and lm_head alike. In its own ids it is the model it was; fed the target's
    ids, every token of the block reads as another token of the block (and its proposals of
    them name other tokens), every token outside the block as itself."""
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    tok = json.loads((d / "tokenizer.json").read_text())
    special = {t["id"] for t in tok["added_tokens"]}
    vocab = tok["model"]["vocab"]
    movable = sorted(i for i in vocab.values() if i not in special and lo <= i < hi)
    perm = dict(zip(movable, np.random.default_rng(seed).permutation(movable).tolist()))
    tok["model"]["vocab"] = {s: perm.get(i, i) for s, i in vocab.items()}
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    tensors = load_file(str(d / "model.safetensors"))
    n = tensors["lm_head.weight"].shape[0]
    new_of_old = torch.tensor([perm.get(i, i) for i in range(n)])
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        w = tensors[name]
        out = torch.empty_like(w)
        out[new_of_old] = w           # the row of old id i moves to its new id
        tensors[name] = out
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})


def add_noise(d: Path, share: float = 0.5, seed: int = 7,
              only: tuple[str, ...] | None = None, prefix: str = "") -> None:
    """Every 2-D weight of the drafter (``only``: those of these names; ``prefix``: those whose
    names start with it, as a drafter's layers inside its target's checkpoint) plus seeded
    Gaussian noise whose standard deviation is ``share`` of the weight's own; norms (1-D)
    untouched."""
    import torch
    from safetensors.torch import load_file, save_file

    gen = torch.Generator().manual_seed(seed)
    tensors = load_file(str(d / "model.safetensors"))
    for name, w in tensors.items():
        if (w.ndim == 2 and w.is_floating_point() and (only is None or name in only)
                and name.startswith(prefix)):
            noise = torch.randn(w.shape, generator=gen, dtype=torch.float32)
            tensors[name] = (w.float() + noise * share * w.float().std()).to(w.dtype)
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
