"""Draft-vs-target configuration audits, without a server.

- ``parallel``: the draft's parallel config as vLLM's own code derives it, field by field
  (``audit_parallel(model_dir) -> ParallelAudit``);
- ``models``: two model directories compared by what the method needs
  (``audit_models(target, draft, method) -> ModelAudit``);
- ``lints``: launch settings and start-up warnings (``lint_cudagraph``, ``lint_block_size``,
  ``lint_log``).
"""
