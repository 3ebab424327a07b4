"""``specdoctor gate``: acceptance and speed as a regression check of a deployment.

A baseline (a stored ``bench`` run, saved under a name or exported as one JSON file) fixes the
cells (prompt set × sampling × concurrency), their prompts, sampling, max tokens and k; a
candidate server is measured over the same cells, and every figure of every cell is compared
with a two-sided test whose family-wise false-alarm rate is controlled (Holm).

- ``compare``: the pure comparison (estimates, intervals, the test, Holm, the verdicts);
- ``paired``: the paired test over the prompts both runs sent (sign-flip permutation);
- ``baseline``: the baseline's JSON schema, its validation and its conversions;
- ``run``: the orchestration (measure the candidate, compare, diagnose a failure);
- ``text``: what a person reads.
"""
