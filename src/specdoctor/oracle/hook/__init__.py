"""The engine-side draft recorder: a directory holding ``sitecustomize.py``, put on the
server's PYTHONPATH by ``oracle.engine_trace.hook_env`` (a package only so that it ships)."""
