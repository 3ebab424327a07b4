"""`astexec`: cut functions out of an engine file and run them, with stubs, in a sandbox.

    from specdoctor.experiments.astexec.run import astexec
    out = astexec("vllm.model_executor.models.qwen3_dflash", ["_dflash_layer_causal"],
                  calls=["_dflash_layer_causal(config, 0)"], config_path=Path("config.json"),
                  stubs=["get_current_vllm_config=raise"])

FILE may be a path or a dotted module name of an installed package (found
without importing it). The result is a plain dict, ready for JSON.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.textfile import MAX_CONFIG, read_limited
from specdoctor.experiments.astexec.cut import cut_definitions
from specdoctor.experiments.astexec.sandbox import SandboxLimits, run_job

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class StubSpec:
    name: str
    mode: str  # raise | value
    expr: str = ""


def parse_stub(text: str) -> StubSpec:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise InputError(f"cannot read --stub {text!r}", "write NAME=raise or NAME=EXPRESSION")
    value = value.strip()
    if value == "raise":
        return StubSpec(name, "raise")
    if not value:
        raise InputError(f"--stub {text!r} has no value", "write NAME=raise or NAME=EXPRESSION")
    return StubSpec(name, "value", value)


def resolve_file(file: str) -> Path:
    path = Path(file).expanduser()
    if path.is_file():
        return path
    if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*", file):
        top, *rest = file.split(".")
        spec = importlib.util.find_spec(top)  # a top-level lookup imports nothing
        if spec is not None and spec.submodule_search_locations:
            base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    return candidate
        raise InputError(f"no module file for {file!r}",
                         "pass a path to a .py file, or the dotted name of an installed module")
    raise InputError(f"{file} does not exist", "pass a path to a .py file or a dotted module name")


def _module_and_snapshot(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """The dotted module name, and the snapshot record when the file sits in a snapshot."""
    from specdoctor.recon.manifest import is_snapshot, load_snapshot

    resolved = path.resolve()
    for parent in resolved.parents:
        if is_snapshot(parent):
            rel = resolved.relative_to(parent).as_posix()
            snap = load_snapshot(parent)
            rec = snap.file(rel)
            cite = {"snapshot": str(parent), "source": snap.source.get("ref"),
                    "source_digest": snap.source.get("digest"),
                    "packages": [f"{p.name} {p.version}" for p in snap.packages],
                    "path": rel, "recorded_sha256": rec.sha256 if rec else None}
            return _dotted(rel), cite
    parts = [resolved.stem] if resolved.name != "__init__.py" else []
    cur = resolved.parent
    while (cur / "__init__.py").is_file():
        parts.insert(0, cur.name)
        cur = cur.parent
    return (".".join(parts) or None), None


def _installed(path: Path, module: str | None) -> dict[str, Any] | None:
    """The installed distribution that ships FILE, with the sha256 its RECORD gives for it."""
    import importlib.metadata as md

    if not module:
        return None
    for dist_name in md.packages_distributions().get(module.split(".")[0], []):
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            continue
        for f in dist.files or []:
            if Path(dist.locate_file(f)).resolve() != path.resolve():
                continue
            recorded = None
            if f.hash is not None and f.hash.mode == "sha256":
                pad = "=" * (-len(f.hash.value) % 4)
                recorded = base64.urlsafe_b64decode(f.hash.value + pad).hex()
            return {"distribution": dist.metadata["Name"], "version": dist.version,
                    "path": str(f), "recorded_sha256": recorded}
    return None


def provenance(path: Path, sha256: str, module: str | None,
               snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """Where the file that ran comes from, checked against the bytes that ran: a snapshot's
    manifest or an installed distribution's RECORD gives the sha256 it had when written."""
    if snapshot is not None:
        origin: dict[str, Any] = {"kind": "snapshot", **snapshot}
    else:
        found = _installed(path, module)
        origin = {"kind": "installed", **found} if found else {"kind": "file"}
    recorded = origin.get("recorded_sha256")
    if origin["kind"] == "file":
        origin["status"] = "not from a snapshot or an installed distribution"
    elif recorded is None:
        origin["status"] = ("not in the snapshot's manifest" if origin["kind"] == "snapshot"
                            else "no sha256 recorded for it")
    elif recorded == sha256:
        origin["status"] = "as recorded"
    else:
        origin["status"] = ("edited after extraction" if origin["kind"] == "snapshot"
                            else "edited after installation")
    origin["sha256"] = sha256
    return origin


def _dotted(rel: str) -> str:
    rel = rel[:-3] if rel.endswith(".py") else rel
    rel = rel[: -len("/__init__")] if rel.endswith("/__init__") else rel
    return rel.replace("/", ".")


def astexec(file: str, names: list[str], *, calls: list[str] | None = None,
            stubs: list[str] | None = None, config_path: Path | None = None,
            config_class: str | None = None, limits: SandboxLimits | None = None) -> dict[str, Any]:
    if not names:
        raise InputError("no definition named", "pass FUNC or Class.method after FILE")
    path = resolve_file(file)
    cut = cut_definitions(path, names)
    overrides = [parse_stub(s) for s in stubs or []]
    for spec in overrides:
        if spec.name not in cut.stubs:
            raise InputError(f"--stub {spec.name}: the cut does not use {spec.name} without "
                             "defining it", f"stubbable names: {', '.join(cut.stubs) or 'none'}")
    _check_config_use(calls or [], config_path, cut)
    config = None
    if config_path is not None:
        try:
            config = json.loads(read_limited(config_path, "model config", MAX_CONFIG, "--config"))
        except (OSError, ValueError, RecursionError) as exc:
            raise InputError(f"cannot read {config_path} as JSON: {exc}",
                             "pass the drafter's config.json") from exc
        if not isinstance(config, dict):
            raise InputError(f"{config_path} is not a JSON object", "pass a model config.json")
    module, snapshot = _module_and_snapshot(path)
    stub_modes = {name: {"mode": "auto"} for name in cut.stubs}
    for spec in overrides:
        stub_modes[spec.name] = {"mode": spec.mode, "expr": spec.expr}
    job = {
        "filename": str(path),
        "module": module,
        "future_annotations": cut.future_annotations,
        "segments": [{"name": s.name, "start": s.start, "text": s.text} for s in cut.segments],
        "stubs": stub_modes,
        "calls": list(calls or []),
        "config": config,
        "config_class": config_class,
    }
    result = run_job(job, limits or SandboxLimits())
    for name, info in result.get("stubs", {}).items():
        info["needed_for"] = cut.stubs.get(name, [])
        info["mode"] = stub_modes[name]["mode"]
    calls_out = result.get("calls", [])
    def_errors = result.get("definition_errors", [])
    return {
        "file": str(path),
        "module": module,
        "file_sha256": cut.file_sha256,
        "provenance": provenance(path, cut.file_sha256, module, snapshot),
        "snapshot": snapshot,
        "future_annotations": cut.future_annotations,
        "config": str(config_path) if config_path else None,
        "config_type": result.get("config_type"),
        "definitions": [{"name": s.name, "kind": s.kind, "lines": [s.start, s.end],
                         "sha256": s.sha256} for s in cut.segments],
        "defined": result.get("defined", []),
        "definition_errors": def_errors,
        "calls": calls_out,
        "raised": sum(1 for c in calls_out if "error" in c) + len(def_errors),
        "stubs": result.get("stubs", {}),
        "printed": result.get("printed", ""),
        "isolation": result.get("isolation"),
    }


def _check_config_use(calls: list[str], config_path: Path | None, cut: Any) -> None:
    """A --call that reads `config` needs --config (unless the cut itself defines `config`)."""
    if config_path is not None or any(s.name == "config" for s in cut.segments):
        return
    for expr in calls:
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError:
            continue  # the sandbox reports it as that call's error
        if any(isinstance(n, ast.Name) and n.id == "config" for n in ast.walk(tree)):
            raise InputError(f"--call {expr!r} uses `config`, but no --config was given",
                             "add --config path/to/config.json (the drafter's config), "
                             "or pass the object itself, e.g. SimpleNamespace(...)")
