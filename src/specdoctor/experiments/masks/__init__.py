"""Attention masks per backend, bit by bit: pure models read from the engine's code.

model.py (the mask as a pure function of conventions), backends.py (each backend's
conventions derived from cited lines), cite.py (file, line, sha256), diff.py
(compare over a ctx range), check.py (against the real ops that run on CPU).
The same models are the reference masks for kernel-equivalence experiments.
"""
