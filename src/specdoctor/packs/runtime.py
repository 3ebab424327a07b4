"""The probe runtime that runs inside the engine's processes (standard library only).

A built pack's ``sitecustomize.py`` loads this file by path and calls ``install(config,
pack_dir)``. Every process that starts Python with the pack on PYTHONPATH (the server and
each worker it spawns) then wraps the pack's targets: functions or methods named by a dotted
path (``pkg.mod.Class.method``) or ``pkg.mod:Class.method``. A target whose module is not
imported yet is wrapped when that module finishes executing (a meta-path finder watches the
module names the targets need), so importers see the wrapped object, and so do registries that
read it at import time.

The probe rule (Case A): wrap, log one ``[probe] NAME {json}`` line, return the original value
unchanged, catch everything. A probe that cannot resolve its target, whose expressions raise,
or whose value cannot be printed logs that once and stays out of the way; the wrapped call's
own result and exceptions pass through untouched. A ``replace`` entry (a patch, not a probe)
calls a function from the pack instead of the original, and says so once.

Lines go to stderr, or, when the pack names ``sink_env`` and that variable holds a path, are
appended to that file (one ``write`` per line, so processes do not interleave within a line).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import threading
from typing import Any

PREFIX = "[probe]"
_MISSING = object()
_lock = threading.Lock()


class _Sink:
    def __init__(self, path: str | None) -> None:
        self.path = path

    def write(self, name: str, data: dict[str, Any]) -> None:
        try:
            line = f"{PREFIX} {name} {json.dumps(data, default=_text)}\n"
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            line = f"{PREFIX} {name} {json.dumps({'error': 'unprintable line: ' + _text(exc)})}\n"
        try:
            if self.path:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode("utf-8", "replace"))
                finally:
                    os.close(fd)
            else:
                sys.stderr.write(line)
                sys.stderr.flush()
        except Exception:  # noqa: BLE001, S110
            pass


def _text(x: Any, limit: int = 400) -> str:
    try:
        s = repr(x)
    except Exception:  # noqa: BLE001
        return f"<unprintable {type(x).__name__}>"
    return s if len(s) <= limit else s[:limit] + f"...(+{len(s) - limit} chars)"


def render(x: Any, limit: int = 400, depth: int = 3) -> Any:
    """A JSON-able picture of ``x``: plain values as they are, containers item by item,
    tensors as shape/dtype/first values, anything else as its (bounded) repr."""
    try:
        if x is None or isinstance(x, (bool, int, float)):
            return x
        if isinstance(x, str):
            return x if len(x) <= limit else x[:limit] + f"...(+{len(x) - limit} chars)"
        if hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "flatten"):
            flat = x.detach().flatten() if hasattr(x, "detach") else x.flatten()
            return {"shape": list(x.shape), "dtype": str(x.dtype),
                    "first": [render(v) for v in flat[:8].tolist()]}
        if depth > 0 and isinstance(x, (list, tuple, set, frozenset)):
            items = list(x)
            out = [render(v, limit, depth - 1) for v in items[:32]]
            return out + [f"...(+{len(items) - 32} items)"] if len(items) > 32 else out
        if depth > 0 and isinstance(x, dict):
            return {str(k): render(v, limit, depth - 1) for k, v in list(x.items())[:64]}
        if hasattr(x, "item") and callable(x.item) and type(x).__module__.startswith("numpy"):
            return x.item()
    except Exception:  # noqa: BLE001, S110 - fall through to repr
        pass
    return _text(x, limit)


class Probe:
    """One entry of a pack: a target, what to log, limits; or a replacement."""

    def __init__(self, cfg: dict[str, Any], sink: _Sink, pack_dir: str) -> None:
        self.name = str(cfg.get("name") or cfg.get("target"))
        self.target = str(cfg.get("target", ""))
        self.when = cfg.get("when", "after")
        self.log = list(cfg.get("log") or [])
        self.limit = int(cfg.get("limit", 1000))
        self.every = max(1, int(cfg.get("every", 1)))
        self.max_chars = int(cfg.get("max_chars", 400))
        self.sink = sink
        self.pack_dir = pack_dir
        self.handler_ref = cfg.get("handler")
        self.replace_ref = cfg.get("replace")
        self.handler: Any = None
        self.replacement: Any = None
        self.calls = 0
        self.lines = 0
        self.done = False          # target wrapped, or given up on
        self.reported: set[str] = set()
        if ":" in self.target:
            mod, qual = self.target.split(":", 1)
            self.splits = [(mod, qual.split("."))]
        else:
            parts = self.target.split(".")
            self.splits = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]

    # -- logging ---------------------------------------------------------------------------
    def once(self, key: str, data: dict[str, Any]) -> None:
        if key not in self.reported:
            self.reported.add(key)
            self.sink.write(self.name, data)

    def emit(self, data: dict[str, Any]) -> None:
        with _lock:
            if self.lines >= self.limit:
                if self.lines == self.limit:
                    self.lines += 1
                    self.sink.write(self.name, {"limit_reached": self.limit})
                return
            self.lines += 1
        self.sink.write(self.name, data)

    def fire(self, args: tuple, kwargs: dict, result: Any = None, raised: Any = None) -> None:
        if not self.log and self.handler is None:
            return  # a pure replacement: it said so once, when it was put in
        try:
            self.calls += 1
            if (self.calls - 1) % self.every:
                return
            if self.handler is not None:
                rows = self.handler(Call(args, kwargs, result, raised, self.params))
                for row in rows or ():
                    self.emit(row if isinstance(row, dict) else {"value": render(row)})
                return
            data: dict[str, Any] = {}
            for expr in self.log:
                try:
                    label = expr.split("=", 1)[0]
                    data[label] = render(self.evaluate(expr, args, kwargs, result),
                                         self.max_chars)
                except Exception as exc:  # noqa: BLE001
                    data[label] = {"error": _text(exc, 200)}
            if raised is not None:
                data["raised"] = _text(raised, 200)
            self.emit(data)
        except Exception as exc:  # noqa: BLE001 - a probe never becomes a fault
            self.once("fire", {"error": f"probe failed: {_text(exc, 300)}"})

    def evaluate(self, expr: str, args: tuple, kwargs: dict, result: Any) -> Any:
        """``root.attr.attr[index]``; root: self, result, args, kwargs, argN or a parameter."""
        head, rest = _split_expr(expr.split("=", 1)[-1])
        if head == "result":
            value = result
        elif head == "args":
            value = args
        elif head == "kwargs":
            value = kwargs
        elif head == "self":
            value = args[0]
        elif head.startswith("arg") and head[3:].isdigit():
            value = args[int(head[3:])]
        else:
            value = self.params(args, kwargs)[head]
        for kind, key in rest:
            if kind == ".":
                value = getattr(value, key)
            else:
                value = value[int(key) if key.lstrip("-").isdigit() else key]
        return value

    def params(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        import inspect

        sig = self._sig = getattr(self, "_sig", None) or inspect.signature(self.original)
        bound = sig.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    # -- wrapping --------------------------------------------------------------------------
    def load_refs(self) -> None:
        if self.handler_ref:
            self.handler = _load_callable(self.pack_dir, self.handler_ref)
        if self.replace_ref:
            self.replacement = _load_callable(self.pack_dir, self.replace_ref)

    def wrap(self, owner: Any, attr: str) -> None:
        raw = owner.__dict__.get(attr, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        if raw is _MISSING:
            raw = getattr(owner, attr)
        kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
        func = raw.__func__ if kind else raw
        if getattr(func, "__specdoctor_probes__", None) and self.name in func.__specdoctor_probes__:
            self.done = True
            return
        if not callable(func):
            self.done = True
            self.once("resolve", {"error": f"{self.target} is a {type(func).__name__}, "
                                           "not a function: not wrapped"})
            return
        self.load_refs()
        self.original = func
        wrapped = self._wrapper(func)
        wrapped.__specdoctor_probes__ = (*getattr(func, "__specdoctor_probes__", ()), self.name)
        setattr(owner, attr, kind(wrapped) if kind else wrapped)
        self.done = True
        if self.replacement is not None:
            self.once("replaced", {"replaced": self.target})

    def _wrapper(self, func: Any) -> Any:
        probe = self
        replacement = self.replacement

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if probe.when == "before":
                probe.fire(args, kwargs)
            try:
                if replacement is not None:
                    result = replacement(func, *args, **kwargs)
                else:
                    result = func(*args, **kwargs)
            except BaseException as exc:
                if probe.when == "after" and probe.log:
                    probe.fire(args, kwargs, None, exc)
                raise
            if probe.when == "after":
                probe.fire(args, kwargs, result)
            return result

        return wrapper

    def try_resolve(self, finished: str | None = None) -> None:
        """Wrap the target if its module is loaded; say once if it can never resolve.
        ``finished``: a module whose code has just run (still flagged as initialising)."""
        if self.done:
            return
        for modname, attrs in self.splits:
            module = sys.modules.get(modname)
            if module is None:
                continue
            if modname != finished and getattr(getattr(module, "__spec__", None),
                                               "_initializing", False):
                return  # its code is still running: wait for it to finish
            owner: Any = module
            for i, part in enumerate(attrs):
                if i == len(attrs) - 1:
                    if _static_get(owner, part) is _MISSING:
                        break
                    try:
                        self.wrap(owner, part)
                    except Exception as exc:  # noqa: BLE001
                        self.done = True
                        self.once("resolve", {"error": f"cannot wrap {self.target}: "
                                                       f"{_text(exc, 300)}"})
                    return
                nxt = _static_get(owner, part)
                if nxt is _MISSING:
                    break
                owner = nxt
            else:
                return
            if not _could_load_later(module, modname, attrs):
                self.done = True
                self.once("resolve", {"error": f"target not found: {self.target} "
                                               f"({modname} has no {'.'.join(attrs)})"})
            return


def _split_expr(expr: str) -> tuple[str, list[tuple[str, str]]]:
    out: list[tuple[str, str]] = []
    i, n = 0, len(expr)
    while i < n and expr[i] not in ".[":
        i += 1
    head = expr[:i]
    while i < n:
        if expr[i] == ".":
            j = i + 1
            while j < n and expr[j] not in ".[":
                j += 1
            out.append((".", expr[i + 1:j]))
            i = j
        elif expr[i] == "[":
            j = expr.index("]", i)
            out.append(("[", expr[i + 1:j].strip("'\"")))
            i = j + 1
        else:
            raise ValueError(f"bad expression {expr!r}")
    return head, out


def _static_get(owner: Any, name: str) -> Any:
    """Attribute lookup that runs no code: module dicts, class MROs, instance dicts."""
    if isinstance(owner, type(sys)):
        return owner.__dict__.get(name, sys.modules.get(f"{owner.__name__}.{name}", _MISSING))
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        return _MISSING
    d = getattr(owner, "__dict__", None)
    return d.get(name, _MISSING) if isinstance(d, dict) else _MISSING


def _could_load_later(module: Any, modname: str, attrs: list[str]) -> bool:
    """True while a deeper submodule that the path may live in has not been imported yet."""
    if not hasattr(module, "__path__") or not attrs:
        return False
    try:
        return importlib.util.find_spec(f"{modname}.{attrs[0]}") is not None
    except Exception:  # noqa: BLE001
        return False


def _load_callable(pack_dir: str, ref: str) -> Any:
    fname, func = ref.split(":", 1)
    path = os.path.join(pack_dir, fname)
    modname = "_specdoctor_pack_" + os.path.splitext(fname)[0].replace("-", "_")
    module = sys.modules.get(modname)
    if module is None:
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
    return getattr(module, func)


class Call:
    """What a handler sees of one call (``result`` is None before the call returns)."""

    def __init__(self, args: tuple, kwargs: dict, result: Any, raised: Any, params: Any) -> None:
        self.args, self.kwargs, self.result, self.raised = args, kwargs, result, raised
        self._params = params

    @property
    def self(self) -> Any:
        return self.args[0]

    def param(self, name: str) -> Any:
        return self._params(self.args, self.kwargs)[name]


class _Finder:
    """Meta-path finder: after a watched module executes, wrap the targets it completes."""

    def __init__(self, probes: list[Probe]) -> None:
        self.probes = probes
        self.watch = {m for p in probes for m, _ in p.splits}
        self.busy = threading.local()

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.watch:
            return None
        # Another pack's finder asks the others too, us included: answer it once per lookup.
        busy = self.busy.__dict__.setdefault("names", set())
        if name in busy:
            return None
        busy.add(name)
        try:
            return self._find(name, path, target)
        finally:
            busy.discard(name)

    def _find(self, name: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                spec = finder.find_spec(name, path, target)
            except Exception:  # noqa: BLE001, S112
                continue
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module
        probes = self.probes

        def exec_and_wrap(module: Any) -> None:
            exec_module(module)
            for p in probes:
                try:
                    p.try_resolve(module.__name__)
                except Exception:  # noqa: BLE001, S110
                    pass

        try:
            loader.exec_module = exec_and_wrap
        except Exception:  # noqa: BLE001, S110 - a loader refusing attributes: leave it
            pass
        return spec


def install(config: dict[str, Any], pack_dir: str) -> list[Probe]:
    """Turn a pack on in this process; returns its probes (for tests)."""
    sink_env = config.get("sink_env")
    sink = _Sink(os.environ.get(sink_env) if sink_env else None)
    probes = [Probe(c, sink, pack_dir) for c in config.get("probes", [])]
    for p in probes:
        p.try_resolve()
    pending = [p for p in probes if not p.done]
    if pending:
        sys.meta_path.insert(0, _Finder(pending))
    return probes


def boot(config: dict[str, Any], pack_dir: str) -> None:
    """What a pack's ``sitecustomize`` runs: install the probes if the gate is set, then run
    the next ``sitecustomize`` on sys.path (the user's, or another pack's) in any case."""
    if os.environ.get(config.get("gate") or ""):
        try:
            install(config, pack_dir)
        except Exception as exc:  # noqa: BLE001 - a pack never stops the server
            _Sink(None).write(str(config.get("name")), {"error": f"pack not installed: "
                                                                 f"{_text(exc, 300)}"})
    chain(pack_dir)


def chain(pack_dir: str) -> None:
    """Execute the first ``sitecustomize.py`` on sys.path after ``pack_dir``."""
    here = os.path.normcase(os.path.abspath(pack_dir))
    seen_here = False
    for entry in list(sys.path):
        try:
            d = os.path.normcase(os.path.abspath(entry or os.getcwd()))
        except Exception:  # noqa: BLE001, S112
            continue
        if d == here:
            seen_here = True
            continue
        if not seen_here:
            continue
        path = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(path):
            name = "_sitecustomize_chained_%x" % (hash(path) & 0xFFFFFFFF)
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return

