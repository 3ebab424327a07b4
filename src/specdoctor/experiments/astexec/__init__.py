"""Run an engine's real functions without the engine: cut with `ast`, stub, sandbox, report.

`specdoctor astexec FILE FUNC|Class.method… [--config config.json] [--call EXPR]
[--stub NAME=VALUE|raise]` — see run.py (API), cut.py (what is cut and stubbed),
runner.py (the sandboxed side) and sandbox.py (isolation and limits).
"""
