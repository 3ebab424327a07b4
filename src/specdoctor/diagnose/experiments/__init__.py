"""Verdict experiments the diagnosis calls, by catalogue id, through ``experiments.base``.

``BUILTIN``: experiments in this package. ``HOOKS``: experiments that live in their own
``specdoctor.experiments.<name>`` package; each exposes ``Experiment`` (the interface of
``experiments.base``) in a module named ``diagnose``. A hook whose module is not installed is
reported by the ledger as inconclusive ("not available in this build") with the command to run
instead — wiring one is adding that module, nothing here changes.
"""

from __future__ import annotations

import importlib

from specdoctor.experiments.base import Experiment

BUILTIN: dict[str, str] = {
    "logs-scan": "specdoctor.diagnose.experiments.logs_scan:LogsScan",
    "oracle-greedy": "specdoctor.diagnose.experiments.oracle:OracleGreedy",
    "oracle-sampled": "specdoctor.diagnose.experiments.oracle:OracleSampled",
    "oracle-counterfactual": "specdoctor.diagnose.experiments.counterfactual:OracleCounterfactual",
    "relaunch-counterfactual":
        "specdoctor.diagnose.experiments.counterfactual:RelaunchCounterfactual",
    "vocab-map-check": "specdoctor.diagnose.experiments.vocab:VocabMapCheck",
    "concurrency-ab": "specdoctor.diagnose.experiments.relaunch:ConcurrencyAB",
    "spec-off-baseline": "specdoctor.diagnose.experiments.relaunch:SpecOffBaseline",
    "restart-ab": "specdoctor.diagnose.experiments.relaunch:RestartAB",
    "trained-depth": "specdoctor.diagnose.experiments.depth:TrainedDepth",
}
HOOKS: dict[str, str] = {
    "compile-cache-ab": "specdoctor.experiments.compile_cache.diagnose:Experiment",
    "probes": "specdoctor.experiments.probes.diagnose:Experiment",
    "config-audit": "specdoctor.experiments.config_audit.diagnose:Experiment",
    "kernel-equivalence": "specdoctor.experiments.kernels.diagnose:Experiment",
    "taps": "specdoctor.experiments.taps.diagnose:Experiment",
    "astexec": "specdoctor.experiments.astexec.diagnose:Experiment",
    "masks": "specdoctor.experiments.masks.diagnose:Experiment",
    "target-precision-ab": "specdoctor.experiments.precision.diagnose:Experiment",
    "tokenizer-check": "specdoctor.experiments.tokenizer.diagnose:Experiment",
}


def load(experiment_id: str) -> Experiment | None:
    """The experiment object for a catalogue id, or None if this build does not have it."""
    path = BUILTIN.get(experiment_id) or HOOKS.get(experiment_id)
    if path is None:
        return None
    module, attr = path.split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None
        raise
    return getattr(mod, attr)()
