"""Oracle acceptance: what acceptance should be, computed from the models themselves.

Loads the target and the drafter with Hugging Face transformers, outside any serving engine,
runs the prompts ``measure`` uses, and simulates a correct engine step by step (``simulate``)
with the verification rules written once (``rules``); prompt lookup is simulated too
(``ngram``). The result is an AcceptanceProfile labelled ``oracle`` (``runner.run_oracle``),
which ``compare`` sets beside a measured run, position by position, with paired intervals.

``predict`` is the one-call library entry point (an AcceptanceProfile); ``runner.run_oracle``
returns everything (traces, expected rates, cost). Drafters that read the target's hidden
states (EAGLE3, MTP, DFlash) live in ``heads``. This package's modules import torch only inside
the functions that load models.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specdoctor.acceptance.profile import AcceptanceProfile
    from specdoctor.oracle.simulate import Sampling


def predict(target: Path, draft: Path | None, method: str, k: int, prompts: Sequence[str],
            sampling: Sampling | None = None, *, max_tokens: int = 64,
            tokenizer: Path | None = None, samples: int = 1, seed: int = 0,
            device: str = "auto", dtype: str = "float32") -> AcceptanceProfile:
    """The acceptance profile a correct engine reaches with these checkpoints on ``prompts``
    (greedy unless ``sampling`` says otherwise), with 95% intervals over prompts.

    ``method``: draft_model, ngram, eagle3, mtp (``draft`` None: the layers are in the target)
    or dflash. ``tokenizer``: the server's ``--tokenizer`` when it is not the target's. Fed a
    drafter's served config and then its trained one, the two profiles are the engine's
    outcome and the counterfactual of a draft-config mismatch."""
    from specdoctor.oracle.runner import OracleConfig, run_oracle
    from specdoctor.oracle.simulate import Sampling

    config = OracleConfig(target=Path(target), draft=None if draft is None else Path(draft),
                          method=method, k=k, prompts=tuple(prompts),
                          sampling=sampling or Sampling(), max_tokens=max_tokens,
                          tokenizer=tokenizer, samples=samples, seed=seed, device=device,
                          dtype=dtype)
    return run_oracle(config).profile
