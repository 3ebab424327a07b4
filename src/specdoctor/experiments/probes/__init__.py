"""Probe packs: ``sitecustomize`` wrappers that log what the engine really does, one line each.

- ``spec``: the TOML spec of a pack (targets, what to log, limits), parsed and checked;
- ``build``: spec → pack directory (``sitecustomize.py`` + the runtime);
- ``runtime``: what runs inside the engine (standard library only; the probe rule);
- ``run``: run a command or a launch with a pack on, collect and store the ``[probe]`` lines;
- ``packs/``: the packs specdoctor ships.

Entry points: ``run.run_command(spec, argv) -> ProbeRun``, ``run.prepare(spec)`` then
``run.with_pack(launch, pack)`` for launch mode, ``run.collect(log_text)``.
"""
