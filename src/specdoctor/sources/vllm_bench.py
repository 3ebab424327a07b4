"""`vllm bench serve` results → a profile, to set specdoctor's figures beside the tool users have.

``vllm bench serve`` (vllm/benchmarks/serve.py) scrapes ``/metrics`` before and after its run and
prints a section::

    --------------Speculative Decoding----------------
    Acceptance rate (%):                     100.00
    Acceptance length:                       5.00
    Drafts:                                  208
    Draft tokens:                            832
    Accepted tokens:                         832
    Per-position acceptance (%):
      Position 0:                            100.00
      ...

and, with ``--save-result``, the same figures in its JSON under ``spec_decode_*`` keys.
Drafts and tokens are integers; per-position rates are percentages with two decimals.
"""

from __future__ import annotations

import re
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import InputError

_HEADER = "Speculative Decoding"
_ROW = re.compile(r"^\s*([A-Za-z][A-Za-z ()%-]*?|Position \d+):\s+(-?[\d.]+|nan)\s*$")


def parse_text_section(text: str) -> dict[str, Any]:
    """The printed figures, as printed: ints for counts, floats for rates (percent)."""
    start = text.find(_HEADER)
    if start < 0:
        raise InputError("no 'Speculative Decoding' section in this output",
                         "was speculation on, and is this the stdout of vllm bench serve?")
    out: dict[str, Any] = {"per_position_pct": []}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("="):
            break
        m = _ROW.match(line)
        if not m:
            continue
        label, value = m.group(1).strip(), m.group(2)
        if label.startswith("Position"):
            out["per_position_pct"].append(float(value))
        elif label in ("Drafts", "Draft tokens", "Accepted tokens"):
            out[label.lower().replace(" ", "_")] = int(value)
        elif label == "Acceptance rate (%)":
            out["acceptance_rate_pct"] = float(value)
        elif label == "Acceptance length":
            out["acceptance_length"] = float(value)
    return out


def profile_from_result_json(result: dict[str, Any]) -> AcceptanceProfile:
    """Counts from a saved result; per-position counts recovered as rate × drafts (exact:
    the tool computes each rate as an integer delta over the integer draft delta)."""
    try:
        drafts = int(result["spec_decode_num_drafts"])
        draft_tokens = int(result["spec_decode_draft_tokens"])
        accepted = int(result["spec_decode_accepted_tokens"])
        rates = [float(r) for r in result.get("spec_decode_per_position_acceptance_rates", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError("this result JSON has no spec_decode_* figures",
                         "save it with vllm bench serve --save-result against a speculating server") from exc
    per_pos = tuple(round(r * drafts) for r in rates) if rates else None
    return AcceptanceProfile(drafts, draft_tokens, accepted, per_pos, len(rates) or None)
