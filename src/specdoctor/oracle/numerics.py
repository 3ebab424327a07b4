"""Near-ties: how often a lower-precision forward pass picks another argmax than the fp32 oracle.

A bf16 engine and an fp32 oracle disagree, correctly, wherever the target's top two logits are
closer than bf16 can resolve: greedy decoding then takes another token and the trajectories part.
That is numerics, not a lost acceptance, and it must be counted, not absorbed in a tolerance.
``argmax_flips`` runs whole sequences (teacher-forced: both precisions see the same tokens)
through one model in two dtypes and reports, per predicted position, whether the argmax
changed and the fp32 top1 - top2 margin there; ``margin_profile`` says how many positions are
near-ties at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MARGIN_BINS = (1e-4, 1e-3, 1e-2, 1e-1)


@dataclass
class FlipReport:
    model: str
    dtype: str
    positions: int = 0
    flips: int = 0
    flip_margins: list[float] = field(default_factory=list)   # fp32 margins where it flipped
    margins_below: dict[str, int] = field(default_factory=dict)  # fp32 margin < bin

    @property
    def flip_rate(self) -> float:
        return self.flips / self.positions if self.positions else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "dtype": self.dtype, "positions": self.positions,
                "flips": self.flips, "flip_rate": round(self.flip_rate, 6),
                "max_flip_margin": round(max(self.flip_margins), 6) if self.flip_margins else None,
                "fp32_margins_below": self.margins_below}


def argmax_flips(model_dir: Path, sequences: Sequence[tuple[Sequence[int], Sequence[int]]],
                 dtype: str = "bfloat16", device: str = "cpu") -> FlipReport:
    """``sequences``: (prompt ids, continuation ids); every continuation position is checked."""
    import torch

    from specdoctor.oracle.models import load_model

    ref = load_model(model_dir, device, "float32")
    low = load_model(model_dir, device, dtype)
    rep = FlipReport(model_dir.name, dtype, margins_below={f"{b:g}": 0 for b in MARGIN_BINS})
    with torch.inference_mode():
        for prompt, cont in sequences:
            ids = torch.tensor([list(prompt) + list(cont)[:-1]], device=device)
            start = len(prompt) - 1
            a = ref(input_ids=ids).logits[0, start:].float()
            b = low(input_ids=ids).logits[0, start:].float()
            top2 = a.topk(2, dim=-1).values
            margin = (top2[:, 0] - top2[:, 1]).cpu().numpy()
            flipped = (a.argmax(-1) != b.argmax(-1)).cpu().numpy()
            rep.positions += len(margin)
            rep.flips += int(flipped.sum())
            rep.flip_margins.extend(float(m) for m in margin[flipped])
            for bound in MARGIN_BINS:
                rep.margins_below[f"{bound:g}"] += int((margin < bound).sum())
    return rep


def margin_profile(margins: Sequence[float]) -> dict[str, int]:
    m = np.asarray(margins, dtype=np.float64)
    return {f"{b:g}": int((m < b).sum()) for b in MARGIN_BINS}


def near_ties(result: Any, dtype: str = "bfloat16") -> list[FlipReport]:
    """Flip reports of the oracle's own models along its own trajectories (greedy runs).

    A drafter that reads the target's hidden states (EAGLE3, DFlash, MTP) is no standalone
    model: only the target is run twice; its drafts' fp32 margins are in every step's trace."""
    from specdoctor.oracle.runner import HEAD_METHODS

    cfg = result.config
    seqs = [(t.prompt_ids, t.output_ids) for t in result.traces if len(t.output_ids) > 1]
    draft = cfg.draft if cfg.method not in HEAD_METHODS else None
    dirs = [cfg.target] + ([draft] if draft is not None else [])
    device = result.cost.device
    return [argmax_flips(d, seqs, dtype, device) for d in dirs]
