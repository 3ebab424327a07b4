"""What a greedy lab server will measure for a drafter, predicted without a server.

A thin call into the oracle (``specdoctor.oracle.predict``), which reads the drafter from the
checkpoint the server loads, with the lab's tokenizer (the server's ``--tokenizer``). ``walk``
is the oracle's greedy step walk, re-exported for the tests that count a designed profile's
steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specdoctor.oracle.heads.engine import step_walk as walk

if TYPE_CHECKING:
    from specdoctor.acceptance.profile import AcceptanceProfile

__all__ = ["predict", "walk"]


def predict(method: str, target: Path, draft: Path | None, prompts: list[str], k: int,
            max_tokens: int) -> AcceptanceProfile:
    """The counters a greedy lab server of (target, draft) should report for ``prompts``."""
    from specdoctor import oracle
    from specdoctor.lab.drafters import targets

    return oracle.predict(target, draft, method, k, prompts, max_tokens=max_tokens,
                          tokenizer=targets.tokenizer_dir())
