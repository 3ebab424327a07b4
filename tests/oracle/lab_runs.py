"""A running lab server measured greedy and sampled with the oracle's draft hook on: the shared
body of the oracle's live tests (their servers: tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.bench import measure as proto


def measure_greedy_and_sampled(url: str, log: Path, prompts: list[str], max_tokens: int,
                               sampling: tuple[float, float]) -> dict[str, Any]:
    """Measure ``prompts`` greedy then sampled on a server whose draft hook writes ``log``; the
    two measurements and the hook's lines of each (``log``: greedy; ``sampled_log``), with
    nothing the server drafted before (the log is emptied first)."""
    n = len(prompts)
    log.write_text("")
    greedy = proto.run(url, prompts, proto.MeasureParams(num_prompts=n, max_tokens=max_tokens))
    greedy_log = log.read_text()
    log.write_text("")
    # seed None: each request its own random stream (one shared seed would make every
    # request draw the same uniforms, and requests would not be independent units).
    sampled = proto.run(url, prompts, proto.MeasureParams(
        num_prompts=n, max_tokens=max_tokens, temperature=sampling[0], top_p=sampling[1],
        seed=None))
    sampled_log = log.with_name(log.stem + "-sampled.jsonl")
    sampled_log.write_text(log.read_text())
    greedy_path = log.with_name(log.stem + "-greedy.jsonl")
    greedy_path.write_text(greedy_log)
    return {"prompts": prompts, "greedy": greedy, "sampled": sampled, "log": greedy_path,
            "sampled_log": sampled_log}


def units(m: proto.Measurement) -> np.ndarray:
    """Per request: drafts, then accepted at each position (compare.compare_units' units)."""
    return np.array([[r.profile.drafts, *r.profile.accepted_per_position] for r in m.requests],
                    dtype=float)
