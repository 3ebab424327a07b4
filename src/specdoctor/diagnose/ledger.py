"""The hypothesis ledger of one investigation: candidates, the plan, verdicts with evidence.

Candidates are the catalogue's hypotheses that can explain the signature's classes. They are
ordered by the cost of the experiment that decides them — not by likelihood: a cheap
experiment that fails is still information (Case A). Experiments that share a launch (the
same relaunch carries a fresh compile cache and the probes) are planned together and the
restart is charged once.

Verdicts: excluded / confirmed / inconclusive / not-reproducible, each with its evidence; a
hypothesis no experiment reached stays pending, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdoctor.verdict.catalogue import RESTART_MIN, Catalogue, Cost
from specdoctor.verdict.catalogue import load as load_catalogue
from specdoctor.diagnose.signature import Signature
from specdoctor.verdict import rules, sizing
from specdoctor.verdict.sizing import Size
from specdoctor.verdict.findings import Basis, ExperimentResult, Finding, Verdict

# Launch groups that are not a relaunch: nothing is shared or charged once.
NO_LAUNCH = ("none", "current")
# Decisive verdicts replace weaker ones; evidence accumulates.
_STRENGTH = {Verdict.PENDING: 0, Verdict.INCONCLUSIVE: 1, Verdict.NOT_REPRODUCIBLE: 2,
             Verdict.EXCLUDED: 3, Verdict.CONFIRMED: 3}
# Classes that need no explanation.
QUIET = ("healthy", "undetermined", "unreferenced", "no-data")
# the greedy shapes that call the acceptance itself low
LOW_SHAPES = ("uniform-low", "cliff", "steep-decay", "zero")


@dataclass
class Entry:
    hypothesis: str
    experiment: str
    cost: Cost
    launch_group: str
    verdict: Verdict = Verdict.PENDING
    evidence: list[str] = field(default_factory=list)
    recovered: float | None = None
    citations: list[dict[str, str]] = field(default_factory=list)
    decided_by: str | None = None
    basis: Basis | None = None   # the deciding finding's
    unchecked: list[str] = field(default_factory=list)   # what its experiments could not check
    size: Size | None = None     # the deciding confirmed finding's (rule cause-sized)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.hypothesis, "experiment": self.experiment,
                "cost": self.cost.to_json(), "launch_group": self.launch_group,
                "verdict": self.verdict.value, "evidence": list(self.evidence),
                "recovered": None if self.recovered is None else round(self.recovered, 4),
                "decided_by": self.decided_by, "basis": self.basis,
                "unchecked": list(self.unchecked), "citations": list(self.citations),
                "size": None if self.size is None else self.size.to_json()}


@dataclass
class Step:
    """One planned experiment and the candidates it is asked about."""

    experiment: str
    hypotheses: tuple[str, ...]
    cost: Cost
    launch_group: str


@dataclass
class Ledger:
    signature: Signature
    entries: list[Entry]
    results: list[ExperimentResult] = field(default_factory=list)
    id: int | None = None
    # the gap each pass asks to explain (greedy, sampled), set by the diagnosis once the
    # oracle ran; confirmed counterfactuals add their gains to it (``asked``)
    gaps: dict[str, Any] = field(default_factory=dict)

    @property
    def asked(self) -> dict[str, sizing.Asked]:
        """Per pass, the gap to explain: the oracle's (``gaps``: a ``rules.Gap``), or the
        largest gain a confirmed counterfactual showed on that pass, the larger."""
        out: dict[str, sizing.Asked] = {}
        for on in (sizing.GREEDY, sizing.SAMPLED):
            g = self.gaps.get(on)
            gains = tuple((e.hypothesis, e.size.loss) for e in self.entries
                          if e.verdict is Verdict.CONFIRMED and e.basis == "counterfactual"
                          and e.size is not None and e.size.on == on)
            a = sizing.asked(g.measured, g.oracle, gains, g.low, g.high,
                             unit=g.unit) if g is not None \
                else sizing.asked(0.0, None, gains)
            if a is not None:
                out[on] = a
        return out

    def entry(self, hid: str) -> Entry | None:
        return next((e for e in self.entries if e.hypothesis == hid), None)

    def plan(self, cat: Catalogue, restart_min: float) -> list[Step]:
        """Experiments to run, cheapest first; those sharing a launch are adjacent and their
        restart is counted once (the group is ordered by its total cost)."""
        wanted: dict[str, list[str]] = {}
        for e in self.entries:
            for exp in cat.deciders(e.hypothesis):
                wanted.setdefault(exp, [])
                if e.hypothesis not in wanted[exp]:
                    wanted[exp].append(e.hypothesis)
        units: dict[str, list[str]] = {}
        for exp in wanted:
            g = cat.experiments[exp].launch_group
            key = exp if g in NO_LAUNCH else f"group:{g}"
            units.setdefault(key, []).append(exp)

        def unit_cost(exps: list[str]) -> float:
            costs = [cat.experiments[x].cost for x in exps]
            return (sum(c.cpu_min + 3.0 * c.gpu_min for c in costs)
                    + max(c.restarts for c in costs) * restart_min)

        steps: list[Step] = []
        for key in sorted(units, key=lambda k: (unit_cost(units[k]), k)):
            for exp in sorted(units[key], key=lambda x: cat.experiments[x].cost.minutes(restart_min)):
                spec = cat.experiments[exp]
                steps.append(Step(exp, tuple(wanted[exp]), spec.cost, spec.launch_group))
        return steps

    def apply(self, result: ExperimentResult) -> None:
        """Record an experiment's findings; a decisive verdict replaces a weaker one, and of two
        confirmations the one that explains more of the loss decides."""
        self.results.append(result)
        for f in result.findings:
            e = self.entry(f.hypothesis)
            if e is None:
                continue
            e.evidence.append(f"[{result.experiment}] {f.verdict.value}: {f.evidence}")
            e.citations.extend(f.citations)
            e.unchecked.extend(u for u in f.unchecked if u not in e.unchecked)
            smaller = (e.verdict is Verdict.CONFIRMED and e.size is not None
                       and f.size is not None and f.size.loss < e.size.loss)
            if _STRENGTH[f.verdict] >= _STRENGTH[e.verdict] and not smaller and not (
                    e.verdict is Verdict.CONFIRMED and f.verdict is not Verdict.CONFIRMED):
                basis = f.basis
                if basis is None and f.verdict is Verdict.CONFIRMED:
                    basis = load_catalogue().confirms_by(result.experiment)
                e.verdict, e.decided_by, e.basis = f.verdict, result.experiment, basis
                if f.recovered is not None:
                    e.recovered = f.recovered
                if f.size is not None:
                    e.size = f.size

    def extend(self, entries: list[Entry], restart_min: float = RESTART_MIN
               ) -> tuple[str, ...]:
        """Add the candidates not in the ledger yet (a signature restated with more classes);
        returns their ids. The order stays by verdict cost."""
        added = [e for e in entries if self.entry(e.hypothesis) is None]
        self.entries = sorted(self.entries + added, key=lambda e: (
            e.cost.minutes(restart_min), e.launch_group, e.hypothesis))
        return tuple(e.hypothesis for e in added)

    def mark(self, hypotheses: tuple[str, ...], verdict: Verdict, reason: str,
             experiment: str) -> None:
        """Same reason for several candidates (an experiment that could not run)."""
        self.apply(ExperimentResult(experiment, [Finding(h, verdict, reason)
                                                 for h in hypotheses]))

    def findings(self) -> list[Finding]:
        return [Finding(e.hypothesis, e.verdict, "; ".join(e.evidence), e.recovered,
                        basis=e.basis, unchecked=tuple(e.unchecked), size=e.size)
                for e in self.entries]

    def answer(self) -> rules.Answer:
        """The root cause, the other confirmed causes, and what remains undetermined (rule
        ``elimination-needs-all``: an answer by elimination needs every rival excluded; rule
        ``cause-sized``: against the gap of each pass, ``asked``)."""
        needs = any(c not in QUIET for c in self.signature.classes)
        return rules.answer(self.findings(), needs, self.asked, self.flagged)

    @property
    def flagged(self) -> tuple[str, ...]:
        """The passes whose acceptance the signature called low: greedy where its shape is one
        of ``LOW_SHAPES``, sampled where it found the sampled pass bound (rule cause-sized
        then does not call a loss under 5% inside a band the signature tolerated)."""
        out = ("greedy",) if self.signature.shape in LOW_SHAPES else ()
        return out + (("sampled",) if "sampling-bound" in self.signature.classes else ())

    def root_cause(self) -> tuple[str | None, list[str]]:
        a = self.answer()
        return a.root, a.others

    def explained(self, cat: Catalogue) -> bool:
        """Every class of trouble in the signature has a confirmed hypothesis that explains it
        (the stopping rule: confirmed, and its competitors for that class need no more runs)."""
        todo = [c for c in self.signature.classes if c not in QUIET]
        if not todo:
            return False
        asked = self.asked
        confirmed = [cat.hypotheses[e.hypothesis] for e in self.entries
                     if e.verdict is Verdict.CONFIRMED and not self._rivals_open(e)
                     and sizing.standing(e.size, sizing.asked_for(e.size, asked),
                                         quiet=not todo, flagged=self.flagged).root]
        return all(any(c in h.signatures for h in confirmed) for c in todo)

    def undersized(self, hypothesis: str, experiment: str) -> bool:
        """A confirmed cause too small to be the answer (rule ``cause-sized``), which
        ``experiment`` did not decide: it may find more of the loss (the replay where a verdict
        patch closed only part of the gap), so it runs for that hypothesis too."""
        e = self.entry(hypothesis)
        if e is None or e.verdict is not Verdict.CONFIRMED or e.size is None:
            return False
        if e.decided_by == experiment:
            return False
        todo = [c for c in self.signature.classes if c not in QUIET]
        return not sizing.standing(e.size, sizing.asked_for(e.size, self.asked),
                                   quiet=not todo, flagged=self.flagged).root

    def _rivals_open(self, e: Entry) -> bool:
        """A cause confirmed by elimination explains nothing while a rival of it in the ledger
        is still open (rule elimination-needs-all): the plan goes on to decide the rivals."""
        if e.basis != "elimination":
            return False
        rivals = rules.ELIMINATION_RIVALS.get(e.hypothesis, ())
        return any(x is not None and x.verdict in rules.OPEN
                   for x in (self.entry(h) for h in rivals))

    def undecided(self) -> list[str]:
        return [e.hypothesis for e in self.entries
                if e.verdict in (Verdict.PENDING, Verdict.INCONCLUSIVE)]

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.entries]


def build(signature: Signature, cat: Catalogue, restart_min: float,
          also: tuple[str, ...] = ()) -> Ledger:
    """The candidates the signature leaves, ordered by the cost of their verdict experiment.

    ``also``: hypotheses to keep whatever the signature (the causes that live in the served
    files when the reference is the oracle, which runs those same files)."""
    hyps = cat.explaining(signature.classes)
    hyps += [cat.hypotheses[h] for h in also if h in cat.hypotheses and cat.hypotheses[h] not in hyps]
    entries = [Entry(h.id, h.experiment, cat.experiments[h.experiment].cost,
                     cat.experiments[h.experiment].launch_group) for h in hyps]
    entries.sort(key=lambda e: (e.cost.minutes(restart_min), e.launch_group, e.hypothesis))
    return Ledger(signature, entries)
