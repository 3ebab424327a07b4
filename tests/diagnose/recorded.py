"""Profiles recorded from real lab runs (see fixtures/recorded_profiles.json's header)."""

from __future__ import annotations

import json
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile, Interval
from specdoctor.diagnose.references import Published, Reference

FIXTURES = Path(__file__).with_name("fixtures")
VLLM_FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm"


def _raw() -> dict:
    return json.loads((FIXTURES / "recorded_profiles.json").read_text())["profiles"]


def profile(case: str, side: str = "measured") -> AcceptanceProfile:
    r = _raw()[case]
    m = r[side]
    per = tuple(m["accepted_per_position"])
    ivs = {name: Interval(lo, hi) for name, (lo, hi) in (m.get("ci95") or {}).items()}
    p = AcceptanceProfile(m["drafts"], m["drafts"] * r["k"], sum(per), per, r["k"])
    return p.with_intervals(ivs)


def tok_s(case: str) -> float:
    return float(_raw()[case]["measured"]["output_tok_s"])


def measure_fixture(name: str) -> AcceptanceProfile:
    """The total of a recorded `specdoctor measure` run (tests/fixtures/vllm/NAME)."""
    t = json.loads((VLLM_FIXTURES / name / "measure_result.json").read_text())["total"]
    ivs = {n: Interval(lo, hi) for n, (lo, hi) in (t.get("ci95") or {}).items()}
    return AcceptanceProfile(t["drafts"], t["draft_tokens"], t["accepted_tokens"],
                             tuple(t["accepted_per_position"]), t["k"]).with_intervals(ivs)


def counts(per_position: list[float], drafts: int = 1000) -> AcceptanceProfile:
    """A constructed profile with these unconditional rates."""
    per = tuple(round(r * drafts) for r in per_position)
    return AcceptanceProfile(drafts, drafts * len(per), sum(per), per, len(per))


def mean_only(mean_length: float, k: int, method: str = "dflash") -> Reference:
    """A figure published as a mean acceptance length (bonus counted) at k, built as the
    published table builds one: a geometric shape with that total, compared on the total."""
    return Published(f"{method}-mean-{mean_length}", method, k, "constructed",
                     mean_length=mean_length).reference()
