"""Probe packs: ``sitecustomize`` wrappers that log what the engine really does, one line each,
or tap or patch it. A tool the experiments, the oracle and the lab use; it imports no layer
above it (docs/experiments-layout.md).

- ``spec``: the TOML spec of a pack (targets, what to log, limits), parsed and checked;
- ``build``: spec → pack directory (``sitecustomize.py`` + the runtime);
- ``runtime``: what runs inside the engine (standard library only; the probe rule);
- ``run``: run a command or a launch with a pack on, collect and store the ``[probe]`` lines;
- ``shipped/``: the packs specdoctor ships (``specdoctor probe list``);
- ``verdicts``: the registry of verdict patches (packs that fix a known engine defect, with
  the upstream report and fix, and a check that they apply to the installed engine);
- ``draft_trace/``: the oracle's engine trace, committed built (``oracle.engine_trace``);
- ``tap`` and ``tap_vllm_cpu``: tensor taps from inside a server, and the tap of vLLM's CPU
  attention the ``draft-attention-taps`` pack calls (read back by ``specdoctor taps check``).

Entry points: ``run.run_command(spec, argv) -> ProbeRun``, ``run.prepare(spec)`` then
``run.with_pack(launch, pack)`` for launch mode, ``run.collect(log_text)``.
"""
