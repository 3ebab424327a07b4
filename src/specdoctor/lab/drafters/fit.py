"""The lab's one deterministic training loop: every drafter head, and the language models of
``lab.train`` (whose rows are sequence starts in the corpus).

The parameters are a dict of named tensors, the loss a function of a batch of row indices; AdamW with linear warm-up and cosine decay, clipped gradients, seeded
init and batch order, a fixed thread count. Same recipe, machine, torch build and threads →
the same bytes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitRecipe:
    steps: int
    batch: int = 32
    lr: float = 3e-3
    warmup: int = 30
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    # One thread: on a shared 2-core machine, two OpenMP threads beside other busy processes
    # run ~3x slower than one (measured: 1.5 s vs 4.4 s per EAGLE3 step at batch 16).
    threads: int = 1

    def key(self) -> dict[str, Any]:
        return asdict(self)


def lr_at(r: FitRecipe, step: int) -> float:
    if step < r.warmup:
        return r.lr * (step + 1) / r.warmup
    t = (step - r.warmup) / max(1, r.steps - r.warmup)
    return r.lr * (r.min_lr_ratio + (1 - r.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


def fit(params: dict[str, torch.Tensor], loss_fn: Callable[[torch.Tensor], torch.Tensor],
        n_rows: int, r: FitRecipe, name: str = "head",
        on_step: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Train ``params`` in place (those with requires_grad); returns a small report."""
    import numpy as np
    import torch

    t0 = time.perf_counter()
    before = torch.get_num_threads()
    torch.set_num_threads(r.threads)
    try:
        train = [p for p in params.values() if p.requires_grad]
        decay = [p for p in train if p.ndim >= 2]
        no_decay = [p for p in train if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": r.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=r.lr, betas=(0.9, 0.95), eps=1e-8)
        rng = np.random.default_rng(r.seed)
        losses: list[float] = []
        for step in range(r.steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(r, step)
            rows = torch.from_numpy(rng.integers(0, n_rows, size=r.batch))
            loss = loss_fn(rows)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(train, r.grad_clip)
            opt.step()
            losses.append(float(loss.detach()))
            if on_step:
                on_step(step + 1, r.steps, losses[-1])
            if (step + 1) % 100 == 0:
                log.info("%s step %d/%d loss %.3f", name, step + 1, r.steps, losses[-1])
    finally:
        torch.set_num_threads(before)
    tail = losses[-20:] or [float("nan")]
    return {"final_loss_mean_last_20": round(sum(tail) / len(tail), 4),
            "loss_every_100": [round(x, 4) for x in losses[::100]],
            "train_seconds": round(time.perf_counter() - t0, 1)}
