"""Oracle acceptance: what acceptance should be, computed from the models themselves.

Loads the target and the drafter with Hugging Face transformers, outside any serving engine,
runs the prompts ``measure`` uses, and simulates a correct engine step by step (``simulate``)
with the verification rules written once (``rules``); prompt lookup is simulated too
(``ngram``). The result is an AcceptanceProfile labelled ``oracle`` (``runner.run_oracle``),
which ``compare`` sets beside a measured run, position by position, with paired intervals.

Import ``specdoctor.oracle.runner`` for the library call; this package's modules import torch
only inside the functions that load models.
"""
