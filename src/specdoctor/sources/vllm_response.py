"""vLLM's per-request spec-decode metrics in a response body → one profile per request.

With ``--per-request-spec-decode-metrics summary|detailed`` (vllm/config/observability.py), each
single-sequence response carries ``metrics.speculative_decoding`` built by
``RequestSpecDecodingStats.to_dict`` (vllm/v1/metrics/stats.py):

- ``acceptance_histogram[j]``: verify steps of this request that accepted exactly j draft tokens
  (length k + 1);
- ``num_spec_steps`` (= drafts), ``num_accepted_draft_tokens``, ``num_draft_tokens``,
  ``num_spec_tokens`` (= k);
- ``per_step_accepted`` / ``per_step_drafted`` (``detailed`` only): one entry per step, in order.

Acceptance is prefix-closed, so position i was accepted in every step that accepted more than i
tokens: ``accepted_per_position[i] = sum(histogram[i+1:])``. Requests are the independent units
the bootstrap resamples.
"""

from __future__ import annotations

from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile


def speculative_block(response: dict[str, Any]) -> dict[str, Any] | None:
    metrics = response.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
        return metrics["speculative_decoding"]
    return None


def profile_from_block(block: dict[str, Any]) -> AcceptanceProfile | None:
    """The request's profile, or None if the block lacks the counters."""
    try:
        drafts = int(block["num_spec_steps"])
        accepted = int(block["num_accepted_draft_tokens"])
        draft_tokens = int(block["num_draft_tokens"])
        if block.get("acceptance_histogram") is None and block.get("positions") is False:
            # a block of counts without positions (llama-server's, made by the bench)
            return AcceptanceProfile(drafts=drafts, draft_tokens=draft_tokens,
                                     accepted_tokens=accepted)
        hist = [int(x) for x in block["acceptance_histogram"]]
        k = int(block.get("num_spec_tokens") or (len(hist) - 1))
    except (KeyError, TypeError, ValueError):
        return None
    per_pos = tuple(sum(hist[i + 1:]) for i in range(max(k, len(hist) - 1)))
    return AcceptanceProfile(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        accepted_per_position=per_pos,
        k=k,
    )


def per_step(block: dict[str, Any]) -> tuple[list[int], list[int]] | None:
    """(accepted, drafted) per verify step, in order, when the server records them."""
    acc, dra = block.get("per_step_accepted"), block.get("per_step_drafted")
    if isinstance(acc, list) and isinstance(dra, list):
        return [int(a) for a in acc], [int(d) for d in dra]
    return None
