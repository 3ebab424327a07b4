"""The model directories of a draft_model or ngram lab server, by kind: the target (``random``:
the tiny random model; ``trained``: trained on the corpus) and the drafter (``copy``: the
target itself; ``small``: a smaller trained drafter), built and trained once."""

from __future__ import annotations

from pathlib import Path

from specdoctor.errors import LabError

TARGET_KINDS = ("random", "trained")
DRAFT_KINDS = ("copy", "small")


def model_dirs(target_kind: str, draft_kind: str, budget: str) -> tuple[Path | None, Path | None]:
    """Model directories of draft_model/ngram servers (None: the random target, its copy)."""
    if target_kind not in TARGET_KINDS or draft_kind not in DRAFT_KINDS:
        raise LabError(f"unknown target/draft kind {target_kind!r}/{draft_kind!r}",
                       f"target: {', '.join(TARGET_KINDS)}; draft: {', '.join(DRAFT_KINDS)}")
    if target_kind == "random" and draft_kind == "copy":
        return None, None
    from specdoctor.lab import train
    from specdoctor.lab.models import target_model

    target = train.trained_target(budget) if target_kind == "trained" else target_model()
    draft = train.small_drafter(budget) if draft_kind == "small" else None
    return target, draft
