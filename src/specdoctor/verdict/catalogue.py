"""The hypothesis catalogue: ``data/catalogue.json`` loaded into typed records and checked.

The JSON is the reviewed artefact and the one registry: hypotheses with their traits (``Traits``:
the groups the rules decide by are read from them, ``groups``), experiments with their costs,
what a confirmation of each rests on (``confirms_by``) and the module that runs each
(``specdoctor.experiments.<module>:<Class>``, ``built`` or ``planned``), and every decision rule
the code applies, with its text. This module loads it and refuses an inconsistent one (an
unknown experiment, signature class or trait, a hypothesis without traits or that no experiment
settles, an experiment without a basis, a planned experiment without its command, a rule the
code applies without text); ``specdoctor.diagnose.catalogue.experiment`` imports a built
experiment by its module path.
"""

from __future__ import annotations

import json
import importlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from specdoctor.launch import engines as _launch_engines
from specdoctor.verdict.findings import BASES, CLASSES

CATALOGUE_FILE = Path(__file__).with_name("data") / "catalogue.json"
# Minutes a relaunch costs when nothing better is known (the lab boots in ~100 s on 2 cores).
RESTART_MIN = 2.0
# Weight of a GPU minute against a CPU minute when ordering the ledger: a lent GPU is scarcer.
GPU_WEIGHT = 3.0
STATUSES = ("built", "planned")
# When an experiment runs: in the plan, cheapest first (most); before the signature, as its
# reference (the oracles); after the plan, when its question is still open (speed).
PHASES = ("plan", "before-signature", "after-plan")
SIDES = ("engine", "files", "target", "workload")
ENGINES = tuple(e.name for e in _launch_engines.ENGINES)   # what not_on may name
ORACLE = ("excludes", "shares")
# Rules the code applies by id (findings it files under ``rule:<id>``, or names in evidence):
# each must have its text in the catalogue.
APPLIED_RULES = ("oracle-equal-low", "oracle-gap-engine", "elimination-needs-all", "zero-not-weak",
                 "slower-split", "sampled-off-oracle", "sampled-equal-oracle",
                 "counterfactual-only", "difference-not-verdict", "root-cause", "cause-sized",
                 "drafting-not-config", "drafting-share")
EXPERIMENTS_PACKAGE = "specdoctor.experiments."


@dataclass(frozen=True)
class Cost:
    cpu_min: float
    gpu_min: float
    restarts: int

    def minutes(self, restart_min: float = RESTART_MIN) -> float:
        """The ledger's ordering key: CPU + weighted GPU minutes + restarts at their price."""
        return self.cpu_min + GPU_WEIGHT * self.gpu_min + self.restarts * restart_min

    def to_json(self) -> dict[str, Any]:
        return {"cpu_min": self.cpu_min, "gpu_min": self.gpu_min, "restarts": self.restarts}


@dataclass(frozen=True)
class ExperimentSpec:
    id: str
    kind: str            # static | offline | live | gpu
    needs: tuple[str, ...]
    cost: Cost
    launch_group: str    # experiments with the same group (not none/current) share one launch
    settles: tuple[str, ...]
    does: str
    module: str = ""     # "specdoctor.experiments.<module>:<Class>"
    status: str = "built"
    by_hand: str = ""    # planned: the command that does it by hand
    confirms_by: str = ""  # what a confirmation from it rests on (findings.BASES)
    phase: str = "plan"    # PHASES
    asks: tuple[str, ...] = ()   # outside the plan: what it is asked about (else its settles)
    beside_crash: bool = False   # still runs, on the files and flags, beside a crashed server
    # engines it cannot run on, each with why (it reads that engine's internals or flags):
    # there it is never run and never counts as excluding anything
    not_on: tuple[tuple[str, str], ...] = ()

    def not_applicable(self, engine: str | None) -> str | None:
        """Why this experiment does not apply to ``engine`` (None: it applies)."""
        return dict(self.not_on).get(engine or "")

    @property
    def planned(self) -> bool:
        return self.status == "planned"

    def planned_text(self) -> str:
        """What the ledger says of a planned experiment: what it would do, how to do it now."""
        return f"planned: {self.does}; run by hand: {self.by_hand}"

    @property
    def asked(self) -> tuple[str, ...]:
        """What the experiment is asked about when it runs outside the plan."""
        return self.asks or self.settles


@dataclass(frozen=True)
class Traits:
    """What the rules read of a hypothesis (the catalogue's ``about`` says each)."""

    side: str                      # engine | files | target | workload
    oracle: str | None = None      # excludes | shares | None
    replay: bool = False           # the engine replay localises it
    contract: bool = False         # a relaunch with a served field set to its reference decides
    expected: bool = False         # confirmed = expected behaviour, not a bug
    rivals: tuple[str, ...] = ()   # ids, "oracle:excludes", "oracle:shares", "replay"


@dataclass(frozen=True)
class Hypothesis:
    id: str
    mechanism: str
    signatures: tuple[str, ...]
    experiment: str
    also_by: tuple[str, ...]
    seen: str
    traits: Traits = Traits("engine")


@dataclass(frozen=True)
class Rule:
    id: str
    text: str
    confirms_by: str = ""   # a rule that confirms: what its confirmation rests on


@dataclass(frozen=True)
class Catalogue:
    hypotheses: dict[str, Hypothesis]
    experiments: dict[str, ExperimentSpec]
    rules: dict[str, Rule]

    def in_phase(self, phase: str) -> tuple[str, ...]:
        """Experiment ids of one phase, in catalogue order."""
        return tuple(e.id for e in self.experiments.values() if e.phase == phase)

    def deciders(self, hid: str) -> list[str]:
        """Experiments that can give a verdict on ``hid``: its own first, then the others."""
        h = self.hypotheses[hid]
        out = [h.experiment, *h.also_by]
        out += [e.id for e in self.experiments.values() if hid in e.settles and e.id not in out]
        return out

    def settled_with(self, hid: str) -> list[str]:
        """Other hypotheses the same verdict experiment settles."""
        exp = self.experiments[self.hypotheses[hid].experiment]
        return [x for x in exp.settles if x != hid]

    def explaining(self, classes: tuple[str, ...]) -> list[Hypothesis]:
        """Hypotheses whose signatures include any of these classes (catalogue order)."""
        return [h for h in self.hypotheses.values() if set(h.signatures) & set(classes)]

    def where(self, **traits: object) -> tuple[str, ...]:
        """Hypothesis ids whose traits have these values, in catalogue order."""
        return tuple(h.id for h in self.hypotheses.values()
                     if all(getattr(h.traits, k) == v for k, v in traits.items()))

    def rivals(self, hid: str) -> tuple[str, ...]:
        """What an answer of ``hid`` by elimination must have excluded: its ``rivals`` trait
        with each group (``oracle:excludes``, ``oracle:shares``, ``replay``) spelt out."""
        out: list[str] = []
        for r in self.hypotheses[hid].traits.rivals:
            if r == "replay":
                ids = self.where(replay=True)
            elif r.startswith("oracle:"):
                ids = self.where(oracle=r.split(":", 1)[1])
            else:
                ids = (r,)
            out += [x for x in ids if x not in out and x != hid]
        return tuple(out)

    def confirms_by(self, source: str) -> str | None:
        """What a confirmation from an experiment (or ``rule:<id>``) rests on."""
        if source.startswith("rule:"):
            rule = self.rules.get(source[5:])
            return rule.confirms_by or None if rule else None
        spec = self.experiments.get(source)
        return spec.confirms_by or None if spec else None


class CatalogueError(ValueError):
    pass


def parse(data: dict[str, Any]) -> Catalogue:
    exps = {}
    for eid, e in data["experiments"].items():
        exps[eid] = ExperimentSpec(eid, e["kind"], tuple(e["needs"]),
                                   Cost(float(e["cpu_min"]), float(e["gpu_min"]),
                                        int(e["restarts"])),
                                   e["launch_group"], tuple(e["settles"]), e["does"],
                                   e["module"], e["status"], e.get("by_hand", ""),
                                   e.get("confirms_by", ""), e.get("phase", "plan"),
                                   tuple(e.get("asks", ())), bool(e.get("beside_crash", False)),
                                   tuple(sorted((e.get("not_on") or {}).items())))
    hyps = {}
    for h in data["hypotheses"]:
        if h["id"] in hyps:
            raise CatalogueError(f"hypothesis {h['id']} listed twice")
        if not isinstance(h.get("traits"), dict) or "side" not in h["traits"]:
            raise CatalogueError(f"hypothesis {h['id']} has no traits (at least its side)")
        t = h["traits"]
        unknown = set(t) - set(Traits.__dataclass_fields__)
        if unknown:
            raise CatalogueError(f"hypothesis {h['id']}: unknown trait(s) {sorted(unknown)}")
        traits = Traits(t["side"], t.get("oracle"), bool(t.get("replay", False)),
                        bool(t.get("contract", False)), bool(t.get("expected", False)),
                        tuple(t.get("rivals", ())))
        hyps[h["id"]] = Hypothesis(h["id"], h["mechanism"], tuple(h["signatures"]),
                                   h["experiment"], tuple(h.get("also_by", ())), h["seen"],
                                   traits)
    rules = {r["id"]: Rule(r["id"], r["text"], r.get("confirms_by", "")) for r in data["rules"]}
    cat = Catalogue(hyps, exps, rules)
    check(cat)
    return cat


def check(cat: Catalogue) -> None:
    """Refuse a catalogue whose references do not resolve."""
    for rid in APPLIED_RULES:
        if rid not in cat.rules or not cat.rules[rid].text.strip():
            raise CatalogueError(f"rule {rid} is applied by the code but has no text here")
    for r in cat.rules.values():
        if r.confirms_by and r.confirms_by not in BASES:
            raise CatalogueError(f"rule {r.id}: confirms_by {r.confirms_by!r} is not one of {BASES}")
    for h in cat.hypotheses.values():
        t = h.traits
        if t.side not in SIDES:
            raise CatalogueError(f"{h.id}: side {t.side!r} is not one of {SIDES}")
        if t.oracle is not None and t.oracle not in ORACLE:
            raise CatalogueError(f"{h.id}: oracle {t.oracle!r} is not one of {ORACLE}")
        for r in t.rivals:
            if r not in cat.hypotheses and r not in ("replay", "oracle:excludes", "oracle:shares"):
                raise CatalogueError(f"{h.id}: unknown rival {r!r}")
        for e in (h.experiment, *h.also_by):
            if e not in cat.experiments:
                raise CatalogueError(f"{h.id}: unknown experiment {e!r}")
        bad = [s for s in h.signatures if s not in CLASSES]
        if bad:
            raise CatalogueError(f"{h.id}: unknown signature class(es) {bad}")
        if h.id not in cat.experiments[h.experiment].settles:
            raise CatalogueError(f"{h.id}: its experiment {h.experiment} does not list it in "
                                 f"'settles'")
    for e in cat.experiments.values():
        if e.status not in STATUSES:
            raise CatalogueError(f"experiment {e.id}: status {e.status!r} is not one of {STATUSES}")
        if not e.module.startswith(EXPERIMENTS_PACKAGE) or e.module.count(":") != 1:
            raise CatalogueError(f"experiment {e.id}: module {e.module!r} is not "
                                 f"{EXPERIMENTS_PACKAGE}<module>:<Class>")
        if e.confirms_by not in BASES:
            raise CatalogueError(f"experiment {e.id}: confirms_by {e.confirms_by!r} is not one of "
                                 f"{BASES}")
        if e.phase not in PHASES:
            raise CatalogueError(f"experiment {e.id}: phase {e.phase!r} is not one of {PHASES}")
        if e.asks and e.phase == "plan":
            raise CatalogueError(f"experiment {e.id}: asks is for an experiment outside the plan "
                                 f"(the plan asks each about what it settles)")
        for hid in e.asks:
            if hid not in cat.hypotheses:
                raise CatalogueError(f"experiment {e.id} asks about unknown hypothesis {hid!r}")
        if e.planned and not e.by_hand:
            raise CatalogueError(f"experiment {e.id} is planned but says no command to run by hand")
        for hid in e.settles:
            if hid not in cat.hypotheses:
                raise CatalogueError(f"experiment {e.id} settles unknown hypothesis {hid!r}")
        for engine, why in e.not_on:
            if engine not in ENGINES or not why.strip():
                raise CatalogueError(f"experiment {e.id}: not_on names {engine!r} (one of "
                                     f"{ENGINES}) with a reason, why it does not apply there")


@lru_cache(maxsize=1)
def load(path: Path = CATALOGUE_FILE) -> Catalogue:
    return parse(json.loads(path.read_text()))


@dataclass(frozen=True)
class Groups:
    """The hypothesis groups the rules decide by, read from the traits (catalogue order)."""

    engine_side: tuple[str, ...]      # the greedy oracle reached excludes them
    oracle_shared: tuple[str, ...]    # the oracle runs them too: matching it clears none
    file_side: tuple[str, ...]        # ... of those, the ones in the served files
    replay_leads: tuple[str, ...]     # what the engine replay localises a gap to
    contract_causes: tuple[str, ...]  # what a relaunch with a served field set decides
    expected: tuple[str, ...]         # confirmed = expected behaviour, not a bug
    elimination_rivals: dict[str, tuple[str, ...]]


@lru_cache(maxsize=1)
def groups() -> Groups:
    cat = load()
    shared = cat.where(oracle="shares")
    return Groups(cat.where(oracle="excludes"), shared,
                  tuple(h for h in shared if cat.hypotheses[h].traits.side == "files"),
                  cat.where(replay=True), cat.where(contract=True), cat.where(expected=True),
                  {h.id: cat.rivals(h.id) for h in cat.hypotheses.values() if h.traits.rivals})
