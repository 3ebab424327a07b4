"""The sandboxed side of `astexec`: run cut definitions with stubs, print one JSON result.

Run as a script by sandbox.py (`python -I runner.py < job.json`), in a fresh
process with resource limits and an empty environment. It imports nothing
from specdoctor: the code under test sees only the standard library, its own
cut source, the stubs and the config.

Stubs: every name the cut needs but does not define is bound to a `Stub`
that records each use (attribute, call, item, base class, `|` in an
annotation…) and returns another stub, so code runs through paths that only
pass engine objects around. A stub called with a single function or class
returns it unchanged, so stubbed decorators keep the decorated definition.
A `raise` stub raises `StubRaised` on any use: if a call completes without it,
that branch was not taken for this input.
"""

from __future__ import annotations

import __future__
import builtins
import io
import json
import os
import sys
import traceback
import types
from typing import Any

MAX_USES = 20


class StubRaised(RuntimeError):
    """A stub set to `raise` was used."""


class _Log:
    def __init__(self) -> None:
        self.uses: dict[str, list[dict[str, str]]] = {}
        self.loaded_at_def: set[str] = set()
        self.raised: set[str] = set()

    def note(self, root: str, path: str, op: str) -> None:
        uses = self.uses.setdefault(root, [])
        if len(uses) < MAX_USES:
            uses.append({"path": path, "op": op})


def _make_stub_class(log: _Log) -> type:
    class Stub:
        __slots__ = ("_root", "_path", "_raise")

        def __init__(self, root: str, path: str, raising: bool = False) -> None:
            object.__setattr__(self, "_root", root)
            object.__setattr__(self, "_path", path)
            object.__setattr__(self, "_raise", raising)

        def _use(self, op: str, child: str | None = None) -> Any:
            log.note(self._root, self._path, op)
            if self._raise:
                log.raised.add(self._root)
                raise StubRaised(f"stub {self._path} was used ({op})")
            return Stub(self._root, child or self._path)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)  # keep copy, pickle and inspect away from stubs
            return self._use("attr", f"{self._path}.{name}")

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if len(args) == 1 and not kwargs and isinstance(args[0], type | types.FunctionType):
                self._use("decorate")
                return args[0]
            return self._use("call", f"{self._path}()")

        def __getitem__(self, key: Any) -> Any:
            return self._use("item", f"{self._path}[]")

        def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
            self._use("base")
            return (_stub_base(self._root, self._path, log),)

        def __or__(self, other: Any) -> Any:
            return self._use("annotation |")

        __ror__ = __or__

        def __iter__(self) -> Any:
            self._use("iter")
            return iter(())

        def __bool__(self) -> bool:
            self._use("bool")
            return True

        def __repr__(self) -> str:
            return f"<stub {self._path}>"

    return Stub


def _stub_base(root: str, path: str, log: _Log) -> type:
    """A real class standing in for a stubbed base class; unknown attributes are logged."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        log.note(root, f"{path}.__init__", "call")

    def __getattr__(self: Any, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        log.note(root, f"{path}.{name}", "attr")
        raise AttributeError(f"{name} (inherited from stubbed base {path})")

    return type(path.rsplit(".", 1)[-1], (), {"__init__": __init__, "__getattr__": __getattr__})


class _DefTimeNames(dict):  # type: ignore[type-arg]
    """Module-level name lookups during `exec`: records stubs loaded at def time.

    Annotations, decorators, defaults and base classes of top-level definitions
    are evaluated by LOAD_NAME against this mapping; stores go through to the
    real globals so functions find each other.
    """

    def __init__(self, real: dict[str, Any], stub_names: set[str], log: _Log) -> None:
        super().__init__()
        self.real, self.stub_names, self.log = real, stub_names, log

    def __getitem__(self, key: str) -> Any:
        if key in self.stub_names:
            self.log.loaded_at_def.add(key)
        if key in self.real:
            return self.real[key]
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self.real[key] = value

    def __delitem__(self, key: str) -> None:
        del self.real[key]

    def __contains__(self, key: object) -> bool:
        return key in self.real

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self.real else default


class Config:
    """A config.json as attributes, as transformers' PretrainedConfig exposes unknown keys.

    Top-level keys are attributes; nested objects stay dicts (`dflash_config`
    is a dict on the real config too). Missing attributes raise AttributeError,
    so `getattr(config, "x", None)` behaves as on the real object.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.__dict__.update(data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"Config({', '.join(sorted(self.__dict__))})"


def _jsonable(value: Any, depth: int = 0) -> Any:
    if depth > 8:
        return {"repr": repr(value)[:200]}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if type(value).__name__ == "Stub":
        return {"stub": object.__getattribute__(value, "_path")}
    return {"repr": repr(value)[:500]}


def _error(exc: BaseException, filename: str) -> dict[str, Any]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = {"line": frames[-1].lineno, "code": frames[-1].line} if frames else None
    return {"type": type(exc).__name__, "message": str(exc)[:1000], "at": where}


def _block_network_and_processes() -> None:
    """Audit hook: no sockets, no subprocesses, no exec — a net under the namespace."""
    blocked = ("socket.", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
               "os.spawn", "os.fork", "os.forkpty", "pty.spawn")
    allowed = ("socket.__new__",)  # creating an AF_UNIX pair in imports is harmless; connect is not

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(blocked) and event not in allowed:
            raise PermissionError(f"astexec sandbox: {event} is not allowed")

    sys.addaudithook(hook)


# Events that change the file system, and which of their arguments are paths.
_PATH_EVENTS = {"os.remove": (0,), "os.rename": (0, 1), "os.mkdir": (0,), "os.rmdir": (0,),
                "os.symlink": (0, 1), "os.link": (0, 1), "os.chmod": (0,), "os.chown": (0,),
                "os.truncate": (0,), "os.utime": (0,), "os.chflags": (0,), "os.lchflags": (0,),
                "os.setxattr": (0,), "os.removexattr": (0,), "os.mkfifo": (0,),
                "os.mknod": (0,), "shutil.rmtree": (0,)}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_DEVICES = ("/dev/null",)


def _confine(home: str) -> None:
    """Audit hook: file-system changes only inside ``home`` (the private working folder; the
    path is resolved, links included, so a link made there does not lead out), and no signal to
    another process. A net under the unprivileged user where specdoctor runs as root, and the
    only guard where it does not (code that calls libc through ctypes is not stopped by it)."""
    root = os.path.realpath(home)
    me = os.getpid()

    def inside(path: Any) -> bool:
        if isinstance(path, int):
            return True  # an open descriptor: it was checked when it was opened
        try:
            p = os.fsdecode(os.fspath(path))
        except TypeError:
            return False
        full = os.path.realpath(os.path.join(os.getcwd(), p))
        return full == root or full.startswith(root + os.sep) or full in _DEVICES

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, 0))[:3]
            writes = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
                isinstance(mode, str) and any(c in mode for c in "wax+"))
            if writes and not inside(path):
                raise PermissionError(f"astexec sandbox: writing {path!r} outside the "
                                      "sandbox's folder is not allowed")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not inside(args[i]):
                    raise PermissionError(f"astexec sandbox: {event} on {args[i]!r} outside "
                                          "the sandbox's folder is not allowed")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if not (event == "os.kill" and args and args[0] == me):
                raise PermissionError(f"astexec sandbox: {event} is not allowed")

    sys.addaudithook(hook)
    import signal

    for module, name in ((os, "pidfd_open"), (signal, "pidfd_send_signal")):
        if hasattr(module, name):  # not audited: taken away
            delattr(module, name)


def _prime_source(job: dict[str, Any]) -> None:
    """Put the cut's lines in linecache under its file name, so errors show the engine's own
    line without reading the file (which the unprivileged user may not be allowed to read)."""
    import linecache

    lines: list[str] = []
    for seg in job["segments"]:
        start = int(seg["start"]) - 1
        text = seg["text"].splitlines(keepends=True)
        if len(lines) < start + len(text):
            lines.extend("\n" for _ in range(start + len(text) - len(lines)))
        lines[start:start + len(text)] = [t if t.endswith("\n") else t + "\n" for t in text]
    linecache.cache[job["filename"]] = (sum(map(len, lines)), None, lines, job["filename"])


# Standard-library modules that Python or the standard library import lazily, on first use
# (a host name's encoding, a date's parsing, inspect's helpers).
_LAZY = ("encodings.idna", "encodings.ascii", "encodings.latin_1", "encodings.utf_16",
         "encodings.utf_32", "encodings.unicode_escape", "encodings.raw_unicode_escape",
         "unicodedata", "stringprep", "_strptime", "inspect", "dis", "copy", "pprint", "textwrap",
         "math", "fractions", "decimal", "dataclasses", "enum", "functools", "itertools",
         "operator", "typing", "warnings", "weakref", "logging", "collections.abc")


def _imports_by_name(call: Any) -> bool:
    """``__import__('x')`` or ``import_module('x')`` (however reached), the name written out."""
    import ast

    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return (name in ("__import__", "import_module") and bool(call.args)
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))


def _preload(job: dict[str, Any]) -> None:
    """Import the standard-library modules the cut imports (and those imported lazily on first
    use), before the user is dropped: the interpreter's own files may lie where the
    unprivileged user cannot read them."""
    import ast
    import importlib

    names: list[str] = list(_LAZY) if job.get("drop_to") else []
    # the cut, and the user's stub values and calls: each may import, by statement or by a
    # call with the module's name written out (__import__('hashlib'), import_module('json'))
    texts = [seg["text"] for seg in job["segments"]]
    texts += [spec["expr"] for spec in job.get("stubs", {}).values() if spec.get("expr")]
    texts += list(job.get("calls", ()))
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
                names += [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Call) and _imports_by_name(node):
                names.append(node.args[0].value)
    for name in names:
        if name.split(".")[0] in sys.stdlib_module_names:
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001, S112 - not a module, or not importable here
                continue


def _drop(to: list[int] | None) -> str:
    """Become the unprivileged user ``to`` (uid, gid): it cannot signal specdoctor nor write
    its files. Returns who the code runs as."""
    if not to:
        return "unchanged"
    uid, gid = int(to[0]), int(to[1])
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    return "nobody" if os.getuid() == uid and os.geteuid() == uid else "unchanged"


def run(job: dict[str, Any], config: Any = None) -> dict[str, Any]:
    log = _Log()
    Stub = _make_stub_class(log)
    filename = job["filename"]
    module_globals: dict[str, Any] = {
        "__name__": job.get("module") or "__astexec__",
        "__file__": filename,
        "__builtins__": builtins,
        "StubRaised": StubRaised,
    }
    stub_names = set(job["stubs"])
    for name, spec in job["stubs"].items():
        mode = spec.get("mode", "auto")
        if mode == "raise":
            module_globals[name] = Stub(name, name, raising=True)
        elif mode == "value":
            module_globals[name] = eval(spec["expr"], {"Stub": Stub, "SimpleNamespace":
                                                       types.SimpleNamespace, "StubRaised": StubRaised})
        else:
            module_globals[name] = Stub(name, name)
    result: dict[str, Any] = {"defined": [], "calls": []}
    names = _DefTimeNames(module_globals, stub_names, log)
    future_flags = __future__.annotations.compiler_flag if job.get("future_annotations") else 0
    for seg in job["segments"]:
        # Pad to the original line numbers so errors cite the engine's own file and line.
        # dont_inherit: this module's `from __future__ import annotations` must not leak
        # into the engine's code, whose annotations are evaluated when `def` runs.
        # The file's own `from __future__ import annotations`, if it had one, applies again.
        code = compile("\n" * (seg["start"] - 1) + seg["text"], filename, "exec",
                       flags=future_flags, dont_inherit=True)
        try:
            exec(code, module_globals, names)
            result["defined"].append(seg["name"])
        except BaseException as exc:  # noqa: BLE001 - reported, the run goes on
            result.setdefault("definition_errors", []).append(
                {"name": seg["name"], **_error(exc, filename)})
    scope = dict(module_globals)
    scope["SimpleNamespace"] = types.SimpleNamespace
    if job.get("config") is not None:  # otherwise `config` is whatever the cut defines, if any
        scope["config"] = config
    for expr in job["calls"]:
        try:
            value = eval(compile(expr, "<--call>", "eval", dont_inherit=True), scope)
            result["calls"].append({"expr": expr, "value": _jsonable(value),
                                    "type": type(value).__name__})
        except BaseException as exc:  # noqa: BLE001 - each call reports its own failure
            result["calls"].append({"expr": expr, "error": _error(exc, filename)})
    result["stubs"] = {
        name: {"loaded_at_def": name in log.loaded_at_def, "uses": log.uses.get(name, []),
               "raised": name in log.raised}
        for name in sorted(stub_names)
    }
    result["config_type"] = type(config).__name__ if config is not None else None
    return result


def _load_config(data: dict[str, Any], config_class: str | None) -> Any:
    if not config_class:
        return Config(data)
    module_name, _, cls_name = config_class.rpartition(".")
    module = __import__(module_name, fromlist=[cls_name])
    cls = getattr(module, cls_name)
    return cls.from_dict(data) if hasattr(cls, "from_dict") else cls(**data)


def main() -> None:
    real_stdout = sys.stdout
    job = json.loads(sys.stdin.read())
    sys.dont_write_bytecode = True
    if job.get("home"):
        _confine(job["home"])
    if job.get("block_network", True):
        _block_network_and_processes()
    captured = io.StringIO()
    sys.stdout = captured  # the code under test may print; the JSON result owns real stdout
    user = "unchanged"
    try:
        # the config is built (its class imported) before the cut's code runs and before the
        # user is dropped; then the cut runs as the unprivileged user
        config = None
        if job.get("config") is not None:
            config = _load_config(job["config"], job.get("config_class"))
        _prime_source(job)
        _preload(job)
        user = _drop(job.get("drop_to"))
        result = run(job, config)
        result["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - the parent turns this into a clear message
        result = {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)[:2000]}}
    sys.stdout = real_stdout
    result["user"] = user
    result["printed"] = captured.getvalue()[-4000:]
    real_stdout.write("\n@@ASTEXEC-RESULT@@" + json.dumps(result) + "\n")
    real_stdout.flush()


if __name__ == "__main__":
    main()
