"""Kernel equivalence on paged KV caches: does an attention kernel compute what the mask model says?

cases.py (shapes and suites, pure), inputs.py (paged cache, shuffled block table, varlen
queries, built from logical K/V), reference.py (fp64 attention over the logical K/V with the
mask model's bit mask), adapters.py (each implementation called with its native parameters),
run.py (per-case errors, tolerances, the negative control, the verdict).
Imports torch only in inputs, reference, adapters and run.
"""
