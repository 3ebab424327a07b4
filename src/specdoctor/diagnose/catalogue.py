"""The catalogue as the diagnosis uses it: ``specdoctor.verdict.catalogue`` (the one registry:
hypotheses with their traits, experiments, rules), and ``experiment``, which imports a built
experiment by the module path its entry names."""

from __future__ import annotations

import importlib

from specdoctor.experiments.base import Experiment
from specdoctor.verdict.catalogue import (  # noqa: F401  (the diagnosis' names for them)
    CATALOGUE_FILE, GPU_WEIGHT, RESTART_MIN, Catalogue, CatalogueError, Cost, ExperimentSpec,
    Hypothesis, Rule, Traits, check, groups, load, parse,
)


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
