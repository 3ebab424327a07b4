"""The engine-side draft recorder: a probe pack (``draft_trace.toml`` and its handler, built into
``sitecustomize.py``) put on the server's PYTHONPATH by ``oracle.engine_trace.hook_env``.
A package only so that it ships; ``tests/packs/test_draft_trace.py`` checks the committed build
against a fresh one."""
