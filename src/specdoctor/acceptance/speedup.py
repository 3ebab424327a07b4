"""What speculation's speed is made of: tokens per step against the draft's cost (pure).

The model (the standard one for chain drafting: Leviathan et al. 2023, "Fast Inference from
Transformers via Speculative Decoding", arXiv:2211.17192, whose walltime improvement divides the
expected tokens per step by γc + 1):

    speedup ≈ AL / (1 + k·c)

- ``AL``: tokens a step emits, the bonus token counted (1 + accepted draft tokens per step);
- ``k``: draft tokens per step;
- ``c``: the cost of drafting one token relative to one target decode step.

Assumptions, each of which moves ``c`` rather than breaking the formula: one verification step
over k + 1 tokens costs one target decode step (decode is memory-bound, so scoring k + 1
positions costs about as much as one; true at concurrency 1 for small k); the draft runs k
sequential steps of equal cost (a head that drafts a whole block in one pass, as DFlash does,
has its one pass spread over k); whatever else a speculative step adds (the scheduler, rejection
sampling, metadata for the draft) is charged to ``c``; speedup is decode speed with speculation
over decode speed without, on the same prompts, greedy, concurrency 1. So ``c`` estimated from
measured speed is the draft's real cost per token in that engine on that machine, and a drafter
whose weights are a share ``r`` of its target's costs about ``c ≈ r`` where decode is
memory-bound (``size_ratio``), more where per-step overheads dominate (tiny models, CPUs).

With ``c`` known, speculation breaks even (speedup 1) at ``k·c`` accepted draft tokens per step:
the acceptance below which no drafter of this cost can be faster than speculation off.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def speedup(accepted_per_draft: float, k: int, c: float) -> float:
    """Predicted speedup over speculation off: (1 + accepted) / (1 + k·c)."""
    if k < 1 or c < 0 or accepted_per_draft < 0:
        raise ValueError(f"needs k >= 1, c >= 0, accepted >= 0 (k={k}, c={c}, "
                         f"accepted={accepted_per_draft})")
    return (1.0 + accepted_per_draft) / (1.0 + k * c)


def draft_cost(measured_speedup: float, accepted_per_draft: float, k: int) -> float:
    """``c`` from a measured speedup (tok/s on over tok/s off) and the acceptance it ran with:
    c = (AL / speedup − 1) / k. Never below 0 (a speedup above AL is noise or a verification
    step cheaper than a decode step: the draft is then free as far as this model can tell)."""
    if measured_speedup <= 0 or k < 1 or accepted_per_draft < 0:
        raise ValueError(f"needs speedup > 0, k >= 1, accepted >= 0 (speedup="
                         f"{measured_speedup}, k={k}, accepted={accepted_per_draft})")
    return max(0.0, ((1.0 + accepted_per_draft) / measured_speedup - 1.0) / k)


def break_even(k: int, c: float) -> float:
    """Accepted draft tokens per step at which speculation is as fast as without: k·c."""
    return k * c


def weight_bytes(files: Iterable[Path]) -> int:
    return sum(p.stat().st_size for p in files
               if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))


def size_ratio(draft_dir: Path | None, target_dir: Path | None) -> float | None:
    """The drafter's weights over its target's, from the bytes of their weight files (None when
    either is unknown or holds none). A cross-check of ``c``, not a measurement: a head that
    reuses its target's embedding and LM head computes more than its own files hold, and bytes
    count precision too (a bf16 drafter beside an fp32 target reads as half its size)."""
    if draft_dir is None or target_dir is None or not draft_dir.is_dir() \
            or not target_dir.is_dir():
        return None
    if draft_dir.resolve() == target_dir.resolve():
        return 1.0   # the target drafting for itself
    d, t = weight_bytes(draft_dir.iterdir()), weight_bytes(target_dir.iterdir())
    return d / t if d and t else None
