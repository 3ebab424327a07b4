"""What a diagnosis is given: its target (a launch command, a URL, log files) and its options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specdoctor.launch import LaunchSpec
from specdoctor.launch.servers import READY_TIMEOUT_S

OFFICIAL = (1.0, 0.95)   # the official sampling of CASES.md's sweeps


@dataclass(frozen=True)
class Target:
    launch: LaunchSpec | None = None
    url: str | None = None
    logs: tuple[Path, ...] = ()

    def describe(self) -> str:
        if self.launch is not None:
            return self.launch.shell_command()
        if self.url is not None:
            return self.url
        return " ".join(map(str, self.logs))


@dataclass
class Options:
    greedy: bool = True
    sampled: tuple[float, float] | None = OFFICIAL
    suites: tuple[str, ...] = ("code", "essay")
    prompts_per_suite: int = 8
    max_tokens: int = 64
    budget_min: float = 10.0
    restart_min: float = 2.0
    reference_file: Path | None = None
    concurrency8: bool = True
    # Compare tok/s with speculation off when acceptance looks healthy (one more server start)
    spec_off: bool = True
    workdir: Path = Path(".")
    # The speculative method and k as the user states them, for targets that do not say
    # (a log excerpt without its start-up lines, a URL): they pick the published reference.
    method: str | None = None
    k: int | None = None
    # Seconds each server the diagnosis starts (baseline, spec-off, relaunches) may take to
    # become ready; then it is stopped and its log tail shown.
    ready_timeout_s: float = READY_TIMEOUT_S
    # A server that cannot be restarted: its model directories as the user gives them (else
    # what /v1/models and the start-up log tell: diagnose.served), and the logs' engine.
    target_dir: Path | None = None
    draft_dir: Path | None = None
    tokenizer_dir: Path | None = None
    engine: str | None = None
