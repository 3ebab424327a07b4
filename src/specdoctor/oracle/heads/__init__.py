"""Drafters that read the target's hidden states — EAGLE3, MTP, DFlash — for the oracle.

Each module reads one format as vLLM 0.32 serves it, from the checkpoint's own config, and
states that drafter's forward once: ``drafts(streams, ids, k)`` gives, for every start in a
text, the chain of k drafts the server's drafter proposes there (feeding its own drafts, as
the server does). ``conventions`` holds the rules that decide which target states a drafter
reads, each pinned by a test against vLLM's own functions.

``load(method, target_dir, draft_dir)`` refuses what it cannot read before loading any large
tensor: an unknown architecture or config key (named, with the vLLM version the oracle
follows), a width or vocabulary that does not match the target (both values), a checkpoint too
large for the device (``models.check_fits``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from specdoctor.errors import InputError

if TYPE_CHECKING:
    import torch

METHODS = ("eagle3", "mtp", "dflash")


class Head(Protocol):
    method: str
    aux_ids: tuple[int, ...]
    block_size: int | None

    def drafts(self, streams: list[torch.Tensor], ids: torch.Tensor, k: int
               ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def to(self, device: str, dtype: torch.dtype) -> Head: ...


def target_tensor_reader(target_dir: Path) -> Callable[[str], Any]:
    """``name -> tensor`` of the target checkpoint, read one tensor at a time (tied LM heads
    resolve to the embeddings)."""
    from specdoctor.oracle.heads import checkpoint as ck

    cfg = ck.read_config(target_dir)

    def get(name: str) -> Any:
        found = ck.load_tensors(target_dir, prefix=name)
        if name in found:
            return found[name]
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings", False):
            return get("model.embed_tokens.weight")
        raise InputError(f"the target checkpoint has no tensor {name!r}, which the drafter "
                         "shares", "pass the target the drafter was trained for")
    return get


def load(method: str, target_dir: Path, draft_dir: Path | None) -> Head:
    """The drafter of ``method`` for ``target_dir`` (MTP: inside it; no ``draft_dir``)."""
    from specdoctor.oracle.heads import checkpoint as ck

    tcfg = ck.read_config(target_dir)
    if method == "mtp":
        if draft_dir is not None:
            raise InputError("--method mtp reads the MTP layers inside the target checkpoint",
                             "drop --draft")
        from specdoctor.oracle.heads import mtp

        return mtp.build(tcfg, lambda prefix: ck.load_tensors(target_dir, prefix=prefix))
    if draft_dir is None:
        raise InputError(f"--method {method} needs the drafter", "pass --draft DIR")
    if method == "eagle3":
        from specdoctor.oracle.heads import eagle3 as m
    elif method == "dflash":
        from specdoctor.oracle.heads import dflash as m  # type: ignore[no-redef]
    else:
        raise InputError(f"unknown drafter method {method!r}",
                         f"choose one of: {', '.join(METHODS)}")
    return m.read(draft_dir, tcfg, target_tensor_reader(target_dir))
