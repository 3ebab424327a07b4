"""The hypothesis catalogue: ``data/catalogue.json`` loaded into typed records and checked.

The JSON is the reviewed artefact (hypotheses, experiments with their costs, decision rules)
and the one registry of experiments: each names the module that runs it
(``specdoctor.experiments.<module>:<Class>``) and its status, ``built`` (the diagnosis runs it)
or ``planned`` (the ledger says what it would do and the command to run by hand). This module
loads it, refuses an inconsistent one (an unknown experiment, a signature class that does not
exist, a hypothesis no experiment settles, a planned experiment without its command) and
imports a built experiment by its module path (``experiment``).
"""

from __future__ import annotations

import json
import importlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from specdoctor.diagnose.signature import CLASSES
from specdoctor.experiments.base import Experiment

CATALOGUE_FILE = Path(__file__).with_name("data") / "catalogue.json"
# Minutes a relaunch costs when nothing better is known (the lab boots in ~100 s on 2 cores).
RESTART_MIN = 2.0
# Weight of a GPU minute against a CPU minute when ordering the ledger: a lent GPU is scarcer.
GPU_WEIGHT = 3.0
STATUSES = ("built", "planned")
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

    @property
    def planned(self) -> bool:
        return self.status == "planned"

    def planned_text(self) -> str:
        """What the ledger says of a planned experiment: what it would do, how to do it now."""
        return f"planned: {self.does}; run by hand: {self.by_hand}"


@dataclass(frozen=True)
class Hypothesis:
    id: str
    mechanism: str
    signatures: tuple[str, ...]
    experiment: str
    also_by: tuple[str, ...]
    seen: str


@dataclass(frozen=True)
class Rule:
    id: str
    text: str


@dataclass(frozen=True)
class Catalogue:
    hypotheses: dict[str, Hypothesis]
    experiments: dict[str, ExperimentSpec]
    rules: dict[str, Rule]

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


class CatalogueError(ValueError):
    pass


def parse(data: dict[str, Any]) -> Catalogue:
    exps = {}
    for eid, e in data["experiments"].items():
        exps[eid] = ExperimentSpec(eid, e["kind"], tuple(e["needs"]),
                                   Cost(float(e["cpu_min"]), float(e["gpu_min"]),
                                        int(e["restarts"])),
                                   e["launch_group"], tuple(e["settles"]), e["does"],
                                   e["module"], e["status"], e.get("by_hand", ""))
    hyps = {}
    for h in data["hypotheses"]:
        if h["id"] in hyps:
            raise CatalogueError(f"hypothesis {h['id']} listed twice")
        hyps[h["id"]] = Hypothesis(h["id"], h["mechanism"], tuple(h["signatures"]),
                                   h["experiment"], tuple(h.get("also_by", ())), h["seen"])
    rules = {r["id"]: Rule(r["id"], r["text"]) for r in data["rules"]}
    cat = Catalogue(hyps, exps, rules)
    check(cat)
    return cat


def check(cat: Catalogue) -> None:
    """Refuse a catalogue whose references do not resolve."""
    for h in cat.hypotheses.values():
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
        if e.planned and not e.by_hand:
            raise CatalogueError(f"experiment {e.id} is planned but says no command to run by hand")
        for hid in e.settles:
            if hid not in cat.hypotheses:
                raise CatalogueError(f"experiment {e.id} settles unknown hypothesis {hid!r}")


@lru_cache(maxsize=1)
def load(path: Path = CATALOGUE_FILE) -> Catalogue:
    return parse(json.loads(path.read_text()))


def experiment(spec: ExperimentSpec) -> Experiment | None:
    """The experiment object of a built catalogue entry; None for a planned one. A built one
    whose module does not import is a broken install, and raises."""
    if spec.planned:
        return None
    module, attr = spec.module.split(":")
    exp: Experiment = getattr(importlib.import_module(module), attr)()
    if exp.id != spec.id:
        raise CatalogueError(f"{spec.module} runs experiment {exp.id!r}, the catalogue calls it "
                             f"{spec.id!r}")
    return exp
