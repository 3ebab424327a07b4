"""The greedy oracle of one hidden-state drafter under many sets of target layers at once.

Which target layers a drafter reads is a config field no file can check when every id is inside
the target: only the acceptance each set gives can. The greedy text does not depend on the
drafter, so the target decodes each prompt once with every layer's stream recorded; each
candidate set then costs only the drafter's chain over that text (``Head.drafts`` on the
streams it picks). Same steps as ``engine.greedy_traces``, so a set's figures are the oracle's
for a config naming those layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class SearchResult:
    candidates: tuple[tuple[int, ...], ...]   # aux ids as vLLM taps them, sorted
    accepted: np.ndarray                      # [candidate, prompt] accepted draft tokens
    drafts: np.ndarray                        # [candidate, prompt] drafts (engine steps)
    wall_s: float

    def per_draft(self, i: int, prompts: Sequence[int] | None = None) -> float:
        """Accepted draft tokens per draft of candidate ``i`` (over ``prompts``: indexes)."""
        cols = list(prompts) if prompts is not None else list(range(self.drafts.shape[1]))
        d = float(self.drafts[i, cols].sum())
        return float(self.accepted[i, cols].sum()) / d if d else 0.0

    def units(self, i: int, prompts: Sequence[int]) -> np.ndarray:
        """Rows per prompt of candidate ``i``: drafts, accepted draft tokens (the units of a
        paired comparison over prompts, ``rules.paired_gain``)."""
        cols = list(prompts)
        return np.column_stack([self.drafts[i, cols], self.accepted[i, cols]])


def aux_search(method: str, target_dir: Path, draft_dir: Path, prompts: Sequence[str],
               candidates: Sequence[Sequence[int]], k: int, max_tokens: int,
               tokenizer_dir: Path | None = None, dtype: str = "float32",
               device: str = "cpu", chunk: int = 64) -> SearchResult:
    """Accepted drafts and drafts per prompt for every candidate set of aux ids (the sets'
    chains computed ``chunk`` at a time as one batch). ``draft_dir`` must load (a copy whose
    config names a set of the fc's size, when the served one does not)."""
    from specdoctor.oracle.models import param_count
    from specdoctor.oracle.runner import SMALL_MODEL_PARAMS, torch_threads

    # as the oracle runs small models (runner.cpu_threads)
    small = param_count(target_dir) + param_count(draft_dir) < SMALL_MODEL_PARAMS
    with torch_threads(device, 1 if small else None):
        return _search(method, target_dir, draft_dir, prompts, candidates, k, max_tokens,
                       tokenizer_dir, dtype, device, chunk)


def _search(method: str, target_dir: Path, draft_dir: Path, prompts: Sequence[str],
            candidates: Sequence[Sequence[int]], k: int, max_tokens: int,
            tokenizer_dir: Path | None, dtype: str, device: str, chunk: int) -> SearchResult:
    import time

    import torch

    from specdoctor.oracle import heads
    from specdoctor.oracle.heads.engine import new_tokens, walk
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import load_model, load_tokenizer

    t0 = time.perf_counter()
    cands = tuple(tuple(sorted(set(int(i) for i in c))) for c in candidates)
    every = tuple(sorted({i for c in cands for i in c}))
    head = heads.load(method, target_dir, draft_dir).to(device, getattr(torch, dtype))
    tok = load_tokenizer(tokenizer_dir or target_dir)
    target = StreamTarget(load_model(target_dir, device, dtype), every)
    ids_of = [list(tok(p)["input_ids"]) for p in prompts]
    accepted = np.zeros((len(cands), len(ids_of)))
    drafts = np.zeros((len(cands), len(ids_of)))
    for j, ids in enumerate(ids_of):
        dec = target.decode(torch.tensor([ids], device=device), new_tokens(k, max_tokens))
        for lo in range(0, len(cands), chunk):
            part = cands[lo:lo + chunk]
            width = len(part[0])
            same = [c for c in part if len(c) == width]
            if len(same) != len(part):
                raise ValueError("candidate sets of one search have one size")
            streams = [torch.cat([dec.streams[every.index(c[s])] for c in part], 0)
                       for s in range(width)]
            text = dec.ids[:, :-1].expand(len(part), -1)
            with torch.inference_mode():
                d, m = head.drafts(streams, text, k)
            for b in range(len(part)):
                n, _dt, acc, _per = walk(dec, 0, d[b].cpu(), m[b].cpu(), k, max_tokens,
                                         j).counts(k)
                accepted[lo + b, j], drafts[lo + b, j] = acc, n
    return SearchResult(cands, accepted, drafts, time.perf_counter() - t0)
