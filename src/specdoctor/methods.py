"""Speculative methods by vLLM's names: the one list every ``--method`` is checked against.

vLLM 0.32's ``SpeculativeConfig.method`` (``vllm/config/speculative.py``), with its MTP model
types under their common name ``mtp``; SGLang's algorithms map onto these names
(``launch.engines.Sglang.TO_METHOD``).
"""

from __future__ import annotations

SPECULATIVE_METHODS = ("draft_model", "ngram", "ngram_gpu", "suffix", "eagle", "eagle3", "mtp",
                       "dflash", "dspark", "medusa", "mlp_speculator")
# Methods that draft by looking the continuation up in the prompt (vLLM's prompt-lookup family):
# no draft model, no draft attention, and drafts that vary in length from step to step.
LOOKUP_METHODS = ("ngram", "ngram_gpu", "suffix")
# Methods whose drafter has no directory of its own: lookup, or MTP layers in the target's
# checkpoint.
NO_DRAFT_DIR = (*LOOKUP_METHODS, "mtp")
