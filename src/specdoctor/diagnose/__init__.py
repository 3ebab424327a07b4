"""The diagnosis: symptom signature → hypothesis ledger ranked by verdict cost → experiments.

``signature`` classifies what was measured against a ``references`` profile; ``catalogue``
imports a built experiment by the module its entry names in the one registry
(``specdoctor.verdict.catalogue``: hypotheses with their traits, experiments, decision rules,
enforced as pure functions by ``specdoctor.verdict.rules``); ``ledger`` keeps the candidates, ordered by the cost
of the experiment that decides them, with their verdicts; ``orchestrator`` runs it all.

This package never imports ``specdoctor.lab``: the lab is a patient, not a colleague. The CLI
turns "no target given" into the lab's launch command before the diagnosis sees it.
"""
