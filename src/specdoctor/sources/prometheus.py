"""vLLM's Prometheus counters (``/metrics``) → acceptance profiles, and run deltas.

Counters (vllm/v1/spec_decode/metrics.py, ``SpecDecodingProm``), labelled ``model_name`` and
``engine``; summed over engines (data-parallel ranks) here:

- ``vllm:spec_decode_num_drafts_total``
- ``vllm:spec_decode_num_draft_tokens_total``
- ``vllm:spec_decode_num_accepted_tokens_total``
- ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."k-1"}``

Each counter also exports a ``_created`` sample: a timestamp, not a count. It is skipped as a
figure but kept, because a changed ``_created`` between two scrapes is the reliable sign of a
restart. Counters are cumulative since start: one run is the delta of two scrapes. A restart in
between (a counter that went down, or a changed ``_created``) is reported as such.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from specdoctor.acceptance.profile import AcceptanceProfile, difference
from specdoctor.errors import InputError, TargetError
from specdoctor.sources.base import count_of, printable

ENGINE = "vllm"
PREFIX = "vllm:spec_decode_"
_NAMES = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
ITERATIONS = "vllm:iteration_tokens_total"   # a histogram: one observation per engine step
# Spec-decode samples one body may hold: vLLM writes 3 + k per engine and model (k <= 64), so
# this allows 100 engine-model pairs at the largest k. A body past it (a huge per-position
# label set) is refused before it is parsed: parsing it would hold every sample in memory.
MAX_SPEC_SERIES = 10_000


@dataclass(frozen=True)
class CounterReading:
    """One scrape of the spec-decode counters, summed over engines."""

    profile: AcceptanceProfile
    created: dict[str, float] = field(default_factory=dict)
    model_names: tuple[str, ...] = ()
    # engine steps so far (``vllm:iteration_tokens_total``'s count, every engine summed): with
    # the drafts, how many requests each step carried (None where the server does not say)
    iterations: float | None = None


def parse_text(text: str) -> CounterReading:
    """Parse a Prometheus exposition; raise InputError if it has no spec-decode counters."""
    totals: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    created: dict[str, float] = {}
    models: set[str] = set()
    found = False
    series = text.count("\n" + PREFIX) + text.startswith(PREFIX)
    if series > MAX_SPEC_SERIES:
        raise InputError(f"this metrics text holds {series:,} {PREFIX}* samples, past the limit "
                         f"of {MAX_SPEC_SERIES:,} (vLLM writes 3 + k per engine and model)",
                         "pass the body of one server's /metrics, unchanged")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise InputError(
            f"not Prometheus text exposition ({printable(str(exc))})",
            "pass the body of a server's /metrics endpoint (curl -s URL/metrics > dump.txt)",
        ) from exc
    iterations: float | None = None
    for fam in families:
        if fam.name == ITERATIONS:
            counts = [x.value for x in fam.samples if x.name == ITERATIONS + "_count"]
            iterations = sum(counts) if counts else None
            continue
        if not fam.name.startswith(PREFIX):
            continue
        found = True
        for s in fam.samples:
            series = s.name + _label_key(s.labels)
            if s.name.endswith("_created"):
                created[series] = s.value
                continue
            if "model_name" in s.labels:
                models.add(s.labels["model_name"])
            base = s.name.removesuffix("_total")
            if base in _NAMES:
                totals[_NAMES[base]] += count_of(s.value, series)
            elif base == _PER_POS and "position" in s.labels:
                per_pos[_position(s.labels["position"], series)] += count_of(s.value, series)
    if not found:
        raise InputError(
            "no vllm:spec_decode_* counters in this metrics text",
            "is speculative decoding on? Start the server with --speculative-config; "
            "for SGLang or llama.cpp pass --engine",
        )
    k = max(per_pos) + 1 if per_pos else None
    profile = AcceptanceProfile(
        drafts=int(totals["drafts"]),
        draft_tokens=int(totals["draft_tokens"]),
        accepted_tokens=int(totals["accepted"]),
        accepted_per_position=tuple(int(per_pos.get(i, 0)) for i in range(k)) if k else None,
        k=k,
    )
    return CounterReading(profile, created, tuple(sorted(models)), iterations)


def _position(label: str, series: str) -> int:
    if not label.isdigit():
        raise InputError(f"{printable(series)}: position {printable(label)!r} is not a number",
                         "pass the /metrics body unchanged, as the server wrote it")
    return int(label)


def _label_key(labels: dict[str, str]) -> str:
    kept = {k: v for k, v in labels.items() if k != "position"} | (
        {"position": labels["position"]} if "position" in labels else {}
    )
    return "{" + ",".join(f"{k}={v}" for k, v in sorted(kept.items())) + "}"


@dataclass(frozen=True)
class Delta:
    profile: AcceptanceProfile
    restarted: bool
    reason: str | None = None


def delta(before: CounterReading, after: CounterReading) -> Delta:
    """The counters of one run: after − before, or a reported restart (never a negative)."""
    changed = [s for s, t in before.created.items() if s in after.created and after.created[s] != t]
    if changed:
        return Delta(after.profile, True, f"counter {changed[0]} was re-created (server restarted)")
    try:
        return Delta(difference(after.profile, before.profile), False)
    except ValueError:
        return Delta(after.profile, True, "a counter went down between scrapes (server restarted)")


def require_no_restart(d: Delta) -> AcceptanceProfile:
    if d.restarted:
        raise TargetError(
            f"the server restarted during the run: {d.reason}",
            "its counters start from zero again, so this run's figures are lost; run it again",
        )
    return d.profile
