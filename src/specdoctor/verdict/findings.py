"""The vocabulary both wings of a diagnosis share: what an experiment says of a hypothesis
(``Finding``: a ``Verdict``, its evidence, its ``Basis`` and the loss it explains), an
experiment's whole answer (``ExperimentResult``) and a change worth a counterfactual (``Lead``).

``experiments`` writes them, ``diagnose`` reads them, the rules (``verdict.rules``) decide on
them; this package imports neither wing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.verdict.sizing import Size


Basis = Literal["counterfactual", "replay", "comparison", "elimination"]
BASES = ("counterfactual", "replay", "comparison", "elimination")
# The signature classes a diagnosis gives a measurement (``diagnose.signature`` decides which);
# the catalogue's hypotheses name those they can explain.
CLASSES = ("healthy", "uniform-low", "cliff", "steep-decay", "zero", "crash", "sampling-bound",
           "load-dependent", "drifting", "slower-than-spec-off", "undetermined", "unreferenced",
           "no-data")


class Verdict(str, enum.Enum):
    CONFIRMED = "confirmed"
    EXCLUDED = "excluded"
    INCONCLUSIVE = "inconclusive"
    NOT_REPRODUCIBLE = "not-reproducible"
    PENDING = "pending"     # not run yet (budget, or the diagnosis stopped before it)


@dataclass(frozen=True)
class Finding:
    hypothesis: str
    verdict: Verdict
    evidence: str
    # Share of the gap to the reference this experiment recovered (0..1), when it recovered
    # any: ``root_cause`` is the confirmed hypothesis that explains most of the gap.
    recovered: float | None = None
    citations: tuple[dict[str, str], ...] = ()   # {"file", "sha256"} of engine code cited
    # What kind of evidence decided it: "counterfactual" (a change that recovers was run and
    # recovered), "replay" (token-level localisation on the engine's own steps), "comparison"
    # (a measured number against a reference only this cause explains), "elimination" (every
    # other candidate excluded); None where excluded by construction.
    basis: Basis | None = None
    # What this experiment could not check that bears on the hypothesis (a field no reference
    # says the value of, a lead the oracle cannot try): an answer "not determined" lists them.
    unchecked: tuple[str, ...] = ()
    # The loss this finding accounts for, in accepted draft tokens per step, where the
    # experiment can size it (``sizing``: a cause that explains too little is not the answer).
    size: Size | None = None
    # The mechanism the finding names within its hypothesis, where an experiment found one
    # (the replay's transformation id, ``oracle.transforms``: "taps-layer-1", ...).
    mechanism: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hypothesis": self.hypothesis, "verdict": self.verdict.value,
                               "evidence": self.evidence}
        if self.mechanism is not None:
            out["mechanism"] = self.mechanism
        if self.recovered is not None:
            out["recovered"] = round(self.recovered, 4)
        if self.size is not None:
            out["size"] = self.size.to_json()
        if self.basis is not None:
            out["basis"] = self.basis
        if self.unchecked:
            out["unchecked"] = list(self.unchecked)
        if self.citations:
            out["citations"] = list(self.citations)
        return out


@dataclass
class ExperimentResult:
    experiment: str
    findings: list[Finding] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)
    # Per-position curves to draw (e.g. "before", "after: rope_theta=10000").
    curves: dict[str, AcceptanceProfile] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)   # what to run where it could not
    error: str | None = None
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"experiment": self.experiment,
                "findings": [f.to_json() for f in self.findings], "numbers": self.numbers,
                "curves": {k: v.to_json() for k, v in self.curves.items()},
                "commands": self.commands, "error": self.error, "wall_s": round(self.wall_s, 2)}


@dataclass(frozen=True)
class Lead:
    """A change worth a counterfactual, found by an experiment that cannot confirm it (a static
    reading of the engine's code, a probe of the live engine): the drafter config field to set
    (``value``; ``remove``: take the field out) and why. Experiments add them to ``ctx.leads``;
    the counterfactuals try them."""

    hypothesis: str
    field: str                 # dotted drafter config field: "rope_theta", "dflash_config.causal"
    value: Any = None
    why: str = ""
    source: str = ""           # the experiment that found it
    remove: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"hypothesis": self.hypothesis, "field": self.field, "value": self.value,
                "remove": self.remove, "why": self.why, "source": self.source}
