"""Runtime patches that lab faults carry: probe packs (``replace`` entries) built blind.

A fault whose mistake lives in the engine's code path rather than in the drafter's files (the
draft's attention losing heads) is applied at run time: its pack spec here is built into
``$SPECDOCTOR_HOME/lab/patches/<hash>/`` where the hash covers the spec and its files, the
built pack is renamed to that hash, and its ``[probe]`` lines go to a file of the lab through
the pack's sink variable instead of the server's log. The server then sees a directory named
by content on its PYTHONPATH, and nothing that names the fault.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from specdoctor.errors import LabError
from specdoctor.launch.spec import LaunchSpec

DIR = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem for p in DIR.glob("*.toml"))


def content_hash(name: str) -> str:
    """sha256 (16 hex) of a patch's spec and of every file it ships."""
    from specdoctor.packs import spec as specmod

    path = DIR / f"{name}.toml"
    if not path.is_file():
        raise LabError(f"no lab patch {name!r}", f"patches: {', '.join(available())}")
    spec = specmod.load(path)
    h = hashlib.sha256(json.dumps(spec.config(), sort_keys=True).encode())
    for f in spec.files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def build(name: str, root: Path) -> tuple[Path, dict[str, str]]:
    """Build patch ``name`` under ``root/<hash>`` (once); returns its directory and the env that
    turns it on (PYTHONPATH not included: see ``apply``)."""
    from specdoctor.packs import spec as specmod
    from specdoctor.packs.build import build as build_pack

    digest = content_hash(name)
    spec = dataclasses.replace(specmod.load(DIR / f"{name}.toml"), name=digest, source=None)
    spec = dataclasses.replace(spec, probes=tuple(dataclasses.replace(p, name=digest)
                                                  for p in spec.probes))
    out = root / digest
    pack = build_pack(spec, out / "pack")
    env = {pack.gate: "1"}
    if pack.sink_env:
        env[pack.sink_env] = str(out / "lines.log")
    return pack.dir, env


def apply(spec: LaunchSpec, name: str, root: Path) -> LaunchSpec:
    """The launch with patch ``name`` on: its pack first on PYTHONPATH, its gate set."""
    import os

    pack_dir, env = build(name, root)
    base = spec.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = str(pack_dir) + (os.pathsep + base if base else "")
    return dataclasses.replace(spec, env={**spec.env, **env})
