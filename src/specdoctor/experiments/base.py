"""The one interface every verdict experiment answers the diagnosis through.

An experiment is a module with a class that has:
- ``id``: its entry in the hypothesis catalogue (``diagnose/data/catalogue.json``), which also
  holds its cost (CPU minutes, GPU minutes, restarts), its launch group and the hypotheses it
  settles — adding an experiment is one module plus one catalogue entry;
- ``unavailable(ctx)``: None when it can run here, else the reason (no launch command, no
  model directories, no GPU, ...), so the ledger records it and prints the command instead;
- ``run(ctx)``: an ``ExperimentResult`` with a ``Finding`` (verdict + evidence) per hypothesis.

An experiment never raises for an expected failure: a crash becomes ``error`` and every
hypothesis it was asked about stays inconclusive, with the reason; the diagnosis goes on.

The server's life is behind ``Launcher`` (start from a ``Launch``, wait until ready, stop):
the command that owns targets (the CLI) passes one in, so experiments run the same way on a
user's command and on the embedded lab without knowing which.
"""

from __future__ import annotations

import enum
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from specdoctor.acceptance.profile import AcceptanceProfile


class Verdict(str, enum.Enum):
    CONFIRMED = "confirmed"
    EXCLUDED = "excluded"
    INCONCLUSIVE = "inconclusive"
    NOT_REPRODUCIBLE = "not-reproducible"
    PENDING = "pending"     # not run yet (budget, or the diagnosis stopped before it)


@dataclass(frozen=True)
class Finding:
    hypothesis: str
    verdict: Verdict
    evidence: str
    # Share of the gap to the reference this experiment recovered (0..1), when it recovered
    # any: ``root_cause`` is the confirmed hypothesis that explains most of the gap.
    recovered: float | None = None
    citations: tuple[dict[str, str], ...] = ()   # {"file", "sha256"} of engine code cited

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hypothesis": self.hypothesis, "verdict": self.verdict.value,
                               "evidence": self.evidence}
        if self.recovered is not None:
            out["recovered"] = round(self.recovered, 4)
        if self.citations:
            out["citations"] = list(self.citations)
        return out


@dataclass
class ExperimentResult:
    experiment: str
    findings: list[Finding] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)
    # Per-position curves to draw (e.g. "before", "after: rope_theta=10000").
    curves: dict[str, AcceptanceProfile] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)   # what to run where it could not
    error: str | None = None
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"experiment": self.experiment,
                "findings": [f.to_json() for f in self.findings], "numbers": self.numbers,
                "curves": {k: v.to_json() for k, v in self.curves.items()},
                "commands": self.commands, "error": self.error, "wall_s": round(self.wall_s, 2)}


# -- launching ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Launch:
    """A server command exactly as the user runs it, and the environment it adds."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    port: int = 8000
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def shell_command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)

    def arg(self, flag: str) -> str | None:
        """The value of ``flag`` (its last occurrence, as argparse reads it)."""
        val = None
        for i, a in enumerate(self.argv):
            if a == flag and i + 1 < len(self.argv):
                val = self.argv[i + 1]
            elif a.startswith(flag + "="):
                val = a.split("=", 1)[1]
        return val

    def with_arg(self, flag: str, value: str | None) -> Launch:
        """The same command with ``flag`` set to ``value`` (None: removed): one change."""
        out: list[str] = []
        skip = False
        for i, a in enumerate(self.argv):
            if skip:
                skip = False
                continue
            if a == flag:
                skip = i + 1 < len(self.argv)
                continue
            if a.startswith(flag + "="):
                continue
            out.append(a)
        if value is not None:
            out += [flag, value]
        return replace(self, argv=tuple(out))

    def with_env(self, **changes: str) -> Launch:
        return replace(self, env={**self.env, **changes})

    def with_port(self, port: int) -> Launch:
        return replace(self.with_arg("--port", str(port)), port=port)

    def speculative_config(self) -> dict[str, Any] | None:
        raw = self.arg("--speculative-config")
        if raw is None:
            return None
        try:
            cfg = json.loads(raw)
        except ValueError:
            return None
        return cfg if isinstance(cfg, dict) else None

    def with_speculative_config(self, cfg: dict[str, Any] | None) -> Launch:
        return self.with_arg("--speculative-config", None if cfg is None else json.dumps(cfg))

    def to_json(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "env": dict(self.env), "port": self.port,
                "host": self.host}


class Server(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def log_path(self) -> Path: ...


class Launcher(Protocol):
    """Starts a server from a Launch and waits until it answers; stops it."""

    def start(self, launch: Launch, log_path: Path) -> Server: ...

    def stop(self, server: Server) -> None: ...


# -- what an experiment is given ------------------------------------------------------------------

@dataclass
class Context:
    """Everything the diagnosis knows when it calls an experiment."""

    workdir: Path
    url: str | None = None                 # a live server to measure (no restart)
    launch: Launch | None = None           # the command, when specdoctor may relaunch
    launcher: Launcher | None = None
    logs: tuple[Path, ...] = ()
    method: str | None = None
    k: int | None = None
    target_dir: Path | None = None
    draft_dir: Path | None = None
    tokenizer_dir: Path | None = None
    prompts: tuple[str, ...] = ()
    max_tokens: int = 64
    sampling: tuple[float, float] | None = None   # the sampled measurement's (T, top_p)
    measured: dict[str, Any] = field(default_factory=dict)   # label -> Measurement-like
    progress: Callable[[str], None] = lambda msg: None
    data: dict[str, Any] = field(default_factory=dict)       # results shared between experiments

    def free_port(self) -> int:
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


class Experiment(Protocol):
    id: str

    def unavailable(self, ctx: Context) -> str | None: ...

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult: ...
