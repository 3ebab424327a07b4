"""Runtime patches that lab faults carry: probe packs (``replace`` entries) built blind.

A fault whose mistake lives in the engine's code path rather than in the drafter's files (the
draft's attention losing heads) is applied at run time: its pack spec here is built into
``$SPECDOCTOR_HOME/lab/patches/<hash>/`` where the hash covers the spec and its files, the
built pack is renamed to that hash, and its ``[probe]`` lines go to a file of the lab through
the pack's sink variable instead of the server's log. The server then sees a directory named
by content on its PYTHONPATH, and nothing that names the fault.

``build_blind`` goes further for the fault clinic (benchmarks/clinic): every name in the pack
(its probes, gate and sink variables, the files it ships) is neutral, and the shipped files
lose their docstrings and comments, so nothing on the server's path names the patch, the fault
or the upstream report it reproduces.
"""

from __future__ import annotations

import ast
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
    pack_dir, env = build(name, root)
    return spec.with_pythonpath(pack_dir).with_env(env)


def stripped_source(text: str) -> str:
    """Python source without its docstrings and comments (same code, re-printed by ``ast``)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"


def build_blind(spec_path: Path, out: Path, gate: str, sink_env: str | None = None) -> Path:
    """Build the pack of ``spec_path`` (a lab patch or a shipped probe pack's .toml) into
    ``out`` with nothing in it that names the pack: probes and pack named by a content hash,
    the given gate and sink variables, shipped files renamed ``h<hash>_<i>.py`` and stripped of
    docstrings and comments. Returns the pack's directory (put it on PYTHONPATH, set ``gate``).
    """
    from specdoctor.packs import spec as specmod
    from specdoctor.packs.build import build as build_pack

    spec = specmod.load(spec_path)
    h = hashlib.sha256(json.dumps(spec.config(), sort_keys=True).encode())
    for f in spec.files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    digest = h.hexdigest()[:16]
    src = out.parent / f".{out.name}-src"
    src.mkdir(parents=True, exist_ok=True)
    renamed: dict[str, str] = {}
    files = []
    for i, f in enumerate(spec.files):
        renamed[f.name] = f"h{digest[:8]}_{i}.py"
        target = src / renamed[f.name]
        target.write_text(stripped_source(f.read_text()))
        files.append(target)

    def ref(r: str | None) -> str | None:
        if r is None:
            return None
        file, fn = r.split(":", 1)
        return f"{renamed[file]}:{fn}"

    probes = tuple(dataclasses.replace(p, name=f"{digest[:8]}-{i}", handler=ref(p.handler),
                                       replace=ref(p.replace))
                   for i, p in enumerate(spec.probes))
    blind = dataclasses.replace(spec, name=digest, probes=probes, gate=gate, sink_env=sink_env,
                                source=None, files=tuple(files))
    pack = build_pack(blind, out)
    for f in files:
        f.unlink()
    src.rmdir()
    return pack.dir
