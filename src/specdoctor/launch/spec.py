"""``LaunchSpec``: a server's command line exactly as the user runs it, plus environment changes.

A spec is immutable; every ``with_*`` returns a new spec that differs from this one by exactly
one thing (k, the method, the drafter, the port, an environment variable, the compile cache,
PYTHONPATH, the visible devices), so two runs differ exactly by what their specs differ by —
``changes_from`` says what that is — and the spec is recorded with every run.

    spec = parse_command("vllm serve Qwen/Qwen3-8B --speculative-config "
                         "'{\\"method\\":\\"eagle3\\",\\"model\\":\\"d\\",\\"num_speculative_tokens\\":3}'")
    spec.with_k(5).with_port(8123).shell_command()
    spec.without_speculation()          # the spec-off baseline, same model and arguments
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.launch import argv as A
from specdoctor.launch import engines
from specdoctor.launch.engines import Engine, Speculation

DEVICE_ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class LaunchSpec:
    """How to start one server: argv, environment overrides, port, and a label for reports."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    port: int = 8000
    host: str = "127.0.0.1"
    label: str = ""

    # ---- reading -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def engine(self) -> str:
        """``vllm``, ``sglang``, ``llamacpp``, or ``unknown``."""
        e = engines.detect(self.argv)
        return e.name if e else "unknown"

    @property
    def speculation(self) -> Speculation | None:
        """The speculative configuration on the command line (None: speculation off)."""
        return self._engine().read(self.argv)

    @property
    def k(self) -> int | None:
        s = self.speculation
        return None if s is None else s.k

    def arg(self, *names: str) -> str | None:
        """The value of an engine option (any of its spellings; the last occurrence wins, as
        argparse reads it); None when absent or a bare flag."""
        return A.get(self.argv, *names)

    def shell_command(self) -> str:
        """The exact command, environment included, as a user would type it."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["argv"] = list(self.argv)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LaunchSpec:
        return cls(argv=tuple(d["argv"]), env=dict(d.get("env") or {}), port=int(d.get("port", 8000)),
                   host=str(d.get("host", "127.0.0.1")), label=str(d.get("label", "")))

    def changes_from(self, other: LaunchSpec) -> list[str]:
        """What this spec changes relative to ``other``, one readable item per difference."""
        out: list[str] = []
        a, b = other.speculation if other.engine != "unknown" else None, (
            self.speculation if self.engine != "unknown" else None)
        if a != b:
            out.append(f"speculation {_spec_text(a)} → {_spec_text(b)}")
        if other.port != self.port:
            out.append(f"port {other.port} → {self.port}")
        for key in sorted(set(self.env) | set(other.env)):
            if self.env.get(key) != other.env.get(key):
                out.append(f"{key}={other.env.get(key, '(unset)')} → {self.env.get(key, '(unset)')}")
        if not out and self.argv != other.argv:
            out.append("arguments differ")
        return out

    # ---- editing (each returns a new spec) -----------------------------------------------
    def with_k(self, k: int) -> LaunchSpec:
        """Another number of draft tokens per step; everything else kept."""
        if k < 1:
            raise InputError(f"k must be at least 1, got {k}", "pass k = 1..16")
        cur = self.speculation
        if cur is None:
            raise InputError("the command has speculation off, so there is no k to change",
                             "add the engine's speculative arguments, or use with_speculative()")
        return self._with(replace(cur, k=k))

    def with_speculative(self, method: str | None = None, k: int | None = None,
                         drafter: str | None = None, **options: Any) -> LaunchSpec:
        """Another speculative method, k or drafter. A new method drops the old method's
        drafter and options (an ngram config has no drafter); unspecified k is kept."""
        cur = self.speculation
        if cur is None or (method is not None and method != cur.method):
            keep_k = cur.k if cur is not None else None
            new = Speculation(method or (cur.method if cur else None), k if k is not None else keep_k,
                              drafter, dict(options))
        else:
            new = Speculation(cur.method, k if k is not None else cur.k,
                              drafter if drafter is not None else cur.drafter,
                              {**cur.options, **options})
        if new.method is None:
            raise InputError("no speculative method given", "pass method=, e.g. 'ngram' or 'eagle3'")
        if new.k is None:
            raise InputError(f"no k for method {new.method}", "pass k=, e.g. 4")
        return self._with(new)

    def without_speculation(self) -> LaunchSpec:
        """The same server with speculation off: the baseline of every speedup."""
        return replace(self, argv=self._engine().write(self.argv, None),
                       label="spec-off")

    def with_env(self, env: Mapping[str, str] | None = None, **more: str) -> LaunchSpec:
        merged = {**self.env, **(env or {}), **more}
        return replace(self, env={k: str(v) for k, v in merged.items()})

    def without_env(self, *names: str) -> LaunchSpec:
        return replace(self, env={k: v for k, v in self.env.items() if k not in names})

    def with_port(self, port: int) -> LaunchSpec:
        if not 0 < port < 65536:
            raise InputError(f"port {port} is out of range", "pick a port in 1..65535")
        return replace(self, argv=A.put(self.argv, "--port", str(port)), port=port)

    def with_cache_root(self, path: Path | str) -> LaunchSpec:
        """A compile cache of its own (vLLM: VLLM_CACHE_ROOT; SGLang: the torch/triton caches)."""
        names = self._engine().cache_env
        if not names:
            raise InputError(f"{self.engine} has no compile cache specdoctor knows of",
                             "set the engine's cache variable with with_env()")
        return self.with_env({n: str(Path(path) / n.lower()) if len(names) > 1 else str(path)
                              for n in names})

    def with_pythonpath(self, path: Path | str, prepend: bool = True) -> LaunchSpec:
        """``path`` put on the server's PYTHONPATH (first by default: probes shadow the engine)."""
        base = self.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        parts = [p for p in base.split(os.pathsep) if p]
        parts = [str(path), *parts] if prepend else [*parts, str(path)]
        return self.with_env(PYTHONPATH=os.pathsep.join(parts))

    def with_devices(self, devices: Sequence[str] | str) -> LaunchSpec:
        ids = devices if isinstance(devices, str) else ",".join(devices)
        return self.with_env({DEVICE_ENV: ids})

    def with_arg(self, name: str, value: str | None) -> LaunchSpec:
        """Any other engine option set (``None``: a bare flag), replacing the user's own."""
        return replace(self, argv=A.put(self.argv, name, value))

    def without_arg(self, name: str) -> LaunchSpec:
        return replace(self, argv=A.drop(self.argv, name))

    def with_label(self, label: str) -> LaunchSpec:
        return replace(self, label=label)

    # ---- internals -----------------------------------------------------------------------
    def _engine(self) -> Engine:
        e = engines.detect(self.argv)
        if e is None:
            raise InputError(
                f"specdoctor does not recognise the server command {' '.join(self.argv[:3])!r}",
                "use `vllm serve …`, `python -m vllm.entrypoints.openai.api_server …`, "
                "`python -m sglang.launch_server …` or `llama-server …`")
        return e

    def _with(self, s: Speculation) -> LaunchSpec:
        """The speculation replaced; the label becomes its short name (``eagle3:k=4``)."""
        return replace(self, argv=self._engine().write(self.argv, s), label=_spec_text(s))


def _spec_text(s: Speculation | None) -> str:
    if s is None:
        return "spec-off"
    return f"{s.method}:k={s.k}"


def parse_command(command: str | Sequence[str], env: Mapping[str, str] | None = None,
                  *, label: str = "", port: int | None = None,
                  any_server: bool = False) -> LaunchSpec:
    """A ``LaunchSpec`` from a command line as the user types it.

    Leading ``NAME=value`` words (and an ``env`` prefix) become environment overrides, merged
    with ``env``; the port and host are read from the engine's own arguments (engine default
    when absent; a wildcard host is probed on 127.0.0.1). ``port``: the port the server listens
    on, when the caller knows better (the command is left as it is).

    A command specdoctor does not recognise is refused, unless ``any_server`` (a target whose
    experiments may only change its port and environment, such as the compile-cache A/B): then
    it is taken as it is, on its ``--port`` (8000 when it has none), and edits of its
    speculation say they cannot be made."""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:   # "No closing quotation"
        raise InputError(f"the launch command cannot be split into words: {exc}",
                         "quote it as the shell would, e.g. '{\"method\": \"ngram\"}'") from None
    overrides = dict(env or {})
    while words and (words[0] == "env" or "=" in words[0] and not words[0].startswith("-")
                     and words[0].split("=", 1)[0].isidentifier()):
        word = words.pop(0)
        if word != "env":
            key, value = word.split("=", 1)
            overrides[key] = value
    if not words:
        raise InputError("the launch command is empty", "pass the server command, e.g. 'vllm serve MODEL'")
    eng = engines.detect(words)
    if eng is None and not any_server:
        raise InputError(
            f"specdoctor does not recognise the server command {' '.join(words[:3])!r}",
            "use `vllm serve …`, `python -m vllm.entrypoints.openai.api_server …`, "
            "`python -m sglang.launch_server …` or `llama-server …`")
    port_text = A.get(words, "--port")
    if port is None:
        try:
            port = int(port_text) if port_text is not None else (
                eng.default_port if eng is not None else 8000)
        except ValueError:
            raise InputError(f"--port {port_text!r} is not a number", "pass --port 8000") from None
    host = A.get(words, "--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    spec = LaunchSpec(argv=tuple(words), env=overrides, port=port, host=host, label=label)
    if eng is None:
        return spec
    spec.speculation  # noqa: B018 - a malformed speculative config fails here, not at launch
    if not label:
        spec = spec.with_label(_spec_text(spec.speculation))
    return spec
