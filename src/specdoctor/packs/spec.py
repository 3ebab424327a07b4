"""Probe pack specs: a TOML file that says what to wrap and what to log, parsed and checked.

    [pack]
    name = "startup"                  # the pack's name (default: the file's stem)
    gate = "SPECDOCTOR_PROBES"        # the pack does nothing unless this variable is set
    sink_env = ""                     # optional: a variable holding a file the lines go to

    [[probe]]
    name = "speculative-config"
    target = "vllm.config.speculative.SpeculativeConfig.__post_init__"   # or mod:Qual.name
    when = "after"                    # or "before" (the arguments as they came in)
    log = ["self.method", "self.num_speculative_tokens", "result"]
    limit = 4                         # lines per process (then one "limit_reached" line)
    every = 1                         # log every Nth call
    handler = "rows.py:rows"          # optional: a function in a file beside the spec that
                                      # gets the call and returns the rows to log
    replace = "fix.py:expand"         # optional, a patch: called as fn(original, *a, **kw)

Each log entry is ``[label=]expression``; expressions start at ``self``, ``result``, ``args``, ``kwargs``, ``argN`` or a parameter name,
followed by ``.attr`` and ``[index]``. The parser checks everything a typo could break before a
server is started with the pack; what only the engine can tell (does the target exist in this
version?) is reported by the pack itself, once, at run time.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.textfile import MAX_CONFIG, read_limited

DEFAULT_GATE = "SPECDOCTOR_PROBES"
_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?$")
_EXPR = re.compile(r"^([A-Za-z_][\w-]*=)?[A-Za-z_]\w*((\.[A-Za-z_]\w*)|(\[[^\]]+\]))*$")
_REF = re.compile(r"^[\w.-]+\.py:[A-Za-z_]\w*$")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
NAME_RULE = ("1 to 64 ASCII letters, digits, '_' or '-', starting with a letter or digit "
             "(the name becomes a folder and a module name)")
_PROBE_NAME = re.compile(r"[\w.:=-]{1,200}")
_PROBE_KEYS = {"name", "target", "when", "log", "limit", "every", "max_chars", "handler", "replace"}


@dataclass(frozen=True)
class Probe:
    name: str
    target: str
    when: str = "after"
    log: tuple[str, ...] = ()
    limit: int = 1000
    every: int = 1
    max_chars: int = 400
    handler: str | None = None
    replace: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "target": self.target, "when": self.when,
                             "log": list(self.log), "limit": self.limit, "every": self.every,
                             "max_chars": self.max_chars}
        if self.handler:
            d["handler"] = self.handler
        if self.replace:
            d["replace"] = self.replace
        return d


@dataclass(frozen=True)
class PackSpec:
    name: str
    probes: tuple[Probe, ...]
    gate: str = DEFAULT_GATE
    sink_env: str | None = None
    source: Path | None = None
    files: tuple[Path, ...] = field(default=())  # handler / replacement files to ship

    def config(self) -> dict[str, Any]:
        """What the runtime reads (JSON-able, no paths of the build machine)."""
        return {"name": self.name, "gate": self.gate, "sink_env": self.sink_env,
                "probes": [p.to_json() for p in self.probes]}


def load(path: Path) -> PackSpec:
    """Parse and check a pack spec; every mistake is an ``InputError`` naming the entry."""
    try:
        if not path.exists():
            raise FileNotFoundError(path)
        raw = tomllib.loads(read_limited(path, "probe spec", MAX_CONFIG).decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"no probe spec at {path}", "pass the path of a .toml probe spec, "
                         "or a pack name from `specdoctor probe list`") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read probe spec {path}: {exc}",
                         "fix the TOML (see docs/experiments.md for the format)") from exc
    return parse(raw, path)


def parse(raw: dict[str, Any], source: Path | None = None) -> PackSpec:
    where = str(source) if source else "probe spec"
    pack = raw.get("pack", {})
    if not isinstance(pack, dict):
        raise InputError(f"{where}: [pack] must be a table", "write [pack] then name = …")
    entries = raw.get("probe", [])
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{where}: no [[probe]] entries", "add at least one [[probe]] table")
    probes = []
    files: list[Path] = []
    seen: set[str] = set()
    for i, e in enumerate(entries):
        probe = _probe(e, f"{where}: probe #{i + 1}")
        if probe.name in seen:
            raise InputError(f"{where}: two probes named {probe.name!r}", "give each a name")
        seen.add(probe.name)
        for ref in (probe.handler, probe.replace):
            if ref:
                f = (source.parent if source else Path.cwd()) / ref.split(":", 1)[0]
                if not f.is_file():
                    raise InputError(f"{where}: probe {probe.name!r} names {ref}, but {f} "
                                     "does not exist", "put the file beside the spec")
                if f not in files:
                    files.append(f)
        probes.append(probe)
    name = safe_name(str(pack.get("name") or (source.stem if source else "probes")), where)
    gate = str(pack.get("gate") or DEFAULT_GATE)
    sink = pack.get("sink_env") or None
    for var in (gate, sink):
        if var is not None and not re.fullmatch(r"[A-Za-z_]\w*", var):
            raise InputError(f"{where}: {var!r} is not an environment variable name",
                             "use letters, digits and _")
    return PackSpec(name, tuple(probes), gate, sink, source, tuple(files))


def safe_name(name: str, where: str) -> str:
    """``name`` if it is a safe pack name (it becomes a folder of the store and part of a module
    name: no path separator, no dot, no space, no control character); else an ``InputError``."""
    if not _NAME.fullmatch(name):
        raise InputError(f"{where}: pack name {name!r} is not allowed",
                         f"a pack name is {NAME_RULE}; set name = \"...\" under [pack]")
    return name


def _probe(e: Any, where: str) -> Probe:
    if not isinstance(e, dict):
        raise InputError(f"{where} is not a table", "write [[probe]] then key = value lines")
    unknown = set(e) - _PROBE_KEYS
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}",
                         f"known keys: {', '.join(sorted(_PROBE_KEYS))}")
    target = e.get("target")
    if not isinstance(target, str) or not _TARGET.match(target) or (
            ":" not in target and "." not in target):
        raise InputError(f"{where}: target {target!r} is not a dotted path",
                         "write pkg.module.function, pkg.module.Class.method or pkg.module:Qual")
    when = e.get("when", "after")
    if when not in ("before", "after"):
        raise InputError(f"{where}: when = {when!r}", "when is \"before\" or \"after\"")
    log = e.get("log", [])
    if not isinstance(log, list) or not all(isinstance(x, str) and _EXPR.match(x) for x in log):
        raise InputError(f"{where}: log must be a list of expressions like self.x.y or arg1[0]",
                         "roots: self, result, args, kwargs, argN, or a parameter name")
    for ref_key in ("handler", "replace"):
        ref = e.get(ref_key)
        if ref is not None and (not isinstance(ref, str) or not _REF.match(ref)):
            raise InputError(f"{where}: {ref_key} = {ref!r}", f"write {ref_key} = \"file.py:function\"")
    if not log and not e.get("handler") and not e.get("replace"):
        raise InputError(f"{where}: nothing to log", "add log = [...] or a handler")
    ints = {}
    for key, default, low in (("limit", 1000, 0), ("every", 1, 1), ("max_chars", 400, 16)):
        v = e.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise InputError(f"{where}: {key} = {v!r}", f"{key} is an integer ≥ {low}")
        ints[key] = v
    name = str(e.get("name") or target)
    if not _PROBE_NAME.fullmatch(name):
        raise InputError(f"{where}: probe name {name!r} is not allowed",
                         "a probe name is 1 to 200 letters, digits, '_', '-', '.', ':' or '=' "
                         "(it starts each [probe] line)")
    return Probe(name, target, when, tuple(log), ints["limit"],
                 ints["every"], ints["max_chars"], e.get("handler"), e.get("replace"))
