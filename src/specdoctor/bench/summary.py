"""From recorded cells to the figures people read: one labelled row per configuration × cell
(repeats folded into a spread), speedup against the spec-off baseline, and the winner of each
workload with every configuration it does not significantly beat named plainly.

Pure functions over the stored cell results, shared by the console, ``--json`` and the report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specdoctor.acceptance.bootstrap import bootstrap_intervals
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.bench import stats
from specdoctor.bench.cell import load_profile
from specdoctor.sources import vllm_response
from specdoctor.store.bench import CellRow


@dataclass
class Row:
    config: str
    role: str
    cell: str
    suite: str
    sampling: str
    concurrency: int
    status: str  # ok | failed | partial
    errors: list[str]
    repeats: int
    tok_s: stats.Spread | None
    stream_tok_s: float | None
    profile: AcceptanceProfile | None
    ttft_p50: float | None
    itl_p50: float | None
    tpot_p50: float | None
    failures: dict[str, int]
    histogram: list[int] | None
    command: str | None
    speedup: float | None = None
    speedup_significant: bool | None = None
    notes: list[str] = field(default_factory=list)
    # per-request profiles of every repeat (the bootstrap's units); None when some lack them
    units: list[AcceptanceProfile] | None = field(default=None, repr=False)

    @property
    def k(self) -> int | None:
        return self.profile.k if self.profile else None

    def to_json(self) -> dict[str, Any]:
        p = self.profile
        return {
            "config": self.config, "role": self.role, "cell": self.cell, "suite": self.suite,
            "sampling": self.sampling, "concurrency": self.concurrency, "status": self.status,
            "errors": self.errors, "repeats": self.repeats,
            "tok_s": self.tok_s.to_json() if self.tok_s else None,
            "stream_tok_s": _r(self.stream_tok_s), "speedup": _r(self.speedup),
            "speedup_significant": self.speedup_significant,
            "mean_acceptance_length": _r(p.mean_acceptance_length) if p else None,
            "acceptance_rate": _r(p.acceptance_rate) if p else None,
            "profile": p.to_json() if p else None,
            "ttft_p50_s": _r(self.ttft_p50), "itl_p50_s": _r(self.itl_p50),
            "tpot_p50_s": _r(self.tpot_p50), "failures": self.failures,
            "accepted_histogram": self.histogram, "command": self.command, "notes": self.notes,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _pct(d: dict[str, Any] | None, key: str = "p50") -> float | None:
    return None if not d else d.get(key)


def rows(cells: Sequence[CellRow], configs: Sequence[dict[str, Any]]) -> list[Row]:
    """One row per configuration × cell, in plan order (configurations, then cells)."""
    roles = {c["label"]: c.get("role", "config") for c in configs}
    order = {c["label"]: i for i, c in enumerate(configs)}
    groups: dict[tuple[str, str], list[CellRow]] = defaultdict(list)
    for c in cells:
        groups[(c.config, c.result.get("cell") or f"{c.suite}/{c.sampling}/c{c.concurrency}")].append(c)
    out = []
    for (config, name), reps in groups.items():
        # figures from the ok repeats; a cell that only failed shows what it finished
        ok = [c.result for c in reps if c.status == "ok"] or \
            [c.result for c in reps if c.result.get("requests_ok")]
        profiles = [p for p in (load_profile(r.get("profile")) for r in ok) if p is not None]
        profile = profiles[0] if len(profiles) == 1 else (sum_profiles(profiles) if profiles else None)
        units = request_units(ok)
        if profile is not None and len(profiles) > 1 and units:
            profile = profile.with_intervals(bootstrap_intervals(units))
        first = ok[0] if ok else reps[0].result
        out.append(Row(
            config=config, role=roles.get(config, "config"), cell=name, suite=reps[0].suite,
            sampling=reps[0].sampling, concurrency=reps[0].concurrency,
            status=_status(reps),
            errors=[c.error for c in reps if c.error],
            repeats=len(reps),
            tok_s=stats.spread([r["tok_s"] for r in ok if r.get("tok_s")],
                               first.get("stream_tok_s_values") or []),
            stream_tok_s=_pct(first.get("stream_tok_s"), "mean"),
            profile=profile,
            ttft_p50=_pct(first.get("ttft_s")), itl_p50=_pct(first.get("itl_s")),
            tpot_p50=_pct(first.get("tpot_s")),
            failures=_sum_failures([c.result for c in reps]),
            histogram=_sum_hist([r.get("accepted_histogram") for r in ok]),
            command=first.get("command"),
            notes=sorted({n for r in ok for n in r.get("notes", [])}),
            units=units,
        ))
    _speedups(out)
    out.sort(key=lambda r: (order.get(r.config, 99), r.suite, r.sampling, r.concurrency))
    return out


def _status(reps: Sequence[CellRow]) -> str:
    good = sum(c.status == "ok" for c in reps)
    return "ok" if good == len(reps) else ("failed" if good == 0 else "partial")


def request_units(results: Sequence[dict[str, Any]]) -> list[AcceptanceProfile] | None:
    """The per-request profiles of these cell results, or None unless every finished request
    carries its own spec-decode metrics."""
    reqs = [q for r in results for q in r.get("requests", []) if q.get("error") is None]
    units = [vllm_response.profile_from_block(q["spec"]) if q.get("spec") else None for q in reqs]
    if not units or any(u is None for u in units):
        return None
    return [u for u in units if u is not None]


def merged_profile(rs: Sequence[Row]) -> AcceptanceProfile | None:
    """Rows of one configuration summed (e.g. over concurrency), with intervals over all their
    requests when every row has its units."""
    ps = [r.profile for r in rs if r.profile is not None]
    if not ps:
        return None
    if len(ps) == 1:
        return ps[0]
    total = sum_profiles(ps)
    if all(r.units for r in rs):
        total = total.with_intervals(bootstrap_intervals([u for r in rs for u in r.units or []]))
    return total


def _sum_failures(results: Sequence[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for r in results:
        for k, n in (r.get("failures") or {}).items():
            total[k] += int(n)
    return dict(total)


def _sum_hist(hists: Sequence[list[int] | None]) -> list[int] | None:
    hs = [h for h in hists if h]
    if not hs:
        return None
    n = max(len(h) for h in hs)
    return [sum(h[j] for h in hs if j < len(h)) for j in range(n)]


def _speedups(rs: list[Row]) -> None:
    base = {r.cell: r for r in rs if r.role == "baseline" and r.tok_s}
    for r in rs:
        b = base.get(r.cell)
        if r.role == "baseline" or b is None or r.tok_s is None or b.tok_s is None:
            continue
        r.speedup = r.tok_s.value / b.tok_s.value
        r.speedup_significant = stats.significant(r.tok_s, b.tok_s)


@dataclass(frozen=True)
class Winner:
    """The fastest speculative configuration of one workload, and how plainly it wins (the
    bench's verdict on a cell, not a ``Verdict`` of the diagnosis)."""

    cell: str
    winner: str
    tok_s: float
    speedup: float | None
    command: str | None
    ties: list[str]  # configurations not significantly slower than the winner
    sentences: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "winner": self.winner, "tok_s": round(self.tok_s, 3),
                "speedup": _r(self.speedup), "command": self.command, "ties": self.ties,
                "sentences": self.sentences}


def verdicts(rs: Sequence[Row]) -> list[Winner]:
    """The fastest speculative configuration of each workload, said plainly: which others it
    does not significantly beat (``a ≈ b``), and whether it beats the baseline at all."""
    by_cell: dict[str, list[Row]] = defaultdict(list)
    for r in rs:
        if r.tok_s is not None:
            by_cell[r.cell].append(r)
    out = []
    for name, group in by_cell.items():
        cands = [r for r in group if r.role != "baseline"]
        if not cands:
            continue
        best = max(cands, key=lambda r: r.tok_s.value)  # type: ignore[union-attr]
        sentences, ties = [], []
        for r in sorted(cands, key=lambda r: -r.tok_s.value):  # type: ignore[union-attr]
            if r is best:
                continue
            assert r.tok_s and best.tok_s
            sentences.append(stats.compare_text(best.config, best.tok_s, r.config, r.tok_s))
            if not stats.significant(best.tok_s, r.tok_s):
                ties.append(r.config)
        base = next((r for r in group if r.role == "baseline"), None)
        if base is not None and base.tok_s and best.tok_s:
            sentences.append(stats.compare_text(best.config, best.tok_s, base.config, base.tok_s))
        out.append(Winner(name, best.config, best.tok_s.value,  # type: ignore[union-attr]
                           best.speedup, best.command, ties, sentences))
    return out
