"""The one interface every verdict experiment answers the diagnosis through.

An experiment is a module with a class that has:
- ``id``: its entry in the hypothesis catalogue (``verdict/data/catalogue.json``), which also
  holds its module path, its status (built or planned), its cost (CPU minutes, GPU minutes,
  restarts), its launch group and the hypotheses it settles — adding an experiment is one
  module plus one catalogue entry (docs/experiments-layout.md);
- ``unavailable(ctx)``: None when it can run here, else the reason (no launch command, no
  model directories, no GPU, ...), so the ledger records it and prints the command instead;
- ``run(ctx)``: an ``ExperimentResult`` with a ``Finding`` (verdict + evidence) per hypothesis.

An experiment never raises for an expected failure: a crash becomes ``error`` and every
hypothesis it was asked about stays inconclusive, with the reason; the diagnosis goes on.

The server's life is behind ``Launcher`` (start from a ``LaunchSpec``, wait until ready, stop):
``specdoctor.launch.Servers`` in a diagnosis, so experiments run the same way on a user's
command and on the embedded lab without knowing which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.experiments.launch_settings import Settings
from specdoctor.launch.spec import LaunchSpec
from specdoctor.verdict.findings import Basis, ExperimentResult, Finding, Lead, Verdict
from specdoctor.verdict.rules import Gap

if TYPE_CHECKING:
    from specdoctor.bench.measure import Measurement

# The shared vocabulary lives in ``verdict.findings``; named here too for the experiments that
# take everything an experiment needs from this one module.
__all__ = ["Basis", "Context", "Experiment", "ExperimentResult", "Finding",
           "Gap", "Launcher", "Lead", "Server", "Verdict"]


# -- launching ------------------------------------------------------------------------------------

class Server(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def log_path(self) -> Path: ...


class Launcher(Protocol):
    """Starts a server from a launch spec and waits until it answers; stops it
    (``specdoctor.launch.Servers``; tests pass their own)."""

    def start(self, launch: LaunchSpec, log_path: Path) -> Server: ...

    def stop(self, server: Server) -> None: ...

    def stop_all(self) -> None:
        """Stop every server started through it and not stopped yet."""


# -- what an experiment is given ------------------------------------------------------------------

@dataclass
class Measured:
    """The server as found, measured by the diagnosis (``diagnose.evidence.measure``): one field
    per pass, None where it was not measured."""

    greedy: Measurement | None = None
    greedy_again: Measurement | None = None   # the same prompts again, same server (repeat)
    sampled: Measurement | None = None        # at the diagnosis' sampling (``ctx.sampling``)
    loaded: Measurement | None = None         # greedy at concurrency 8
    # greedy at concurrency 1 at the loaded pass's length, where that pass's requests were made
    # longer to run together (``common.measure_loaded``)
    load_reference: Measurement | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, f) is not None for f in self.__dataclass_fields__)


@dataclass
class Context:
    """Everything the diagnosis knows when it calls an experiment, and what experiments leave
    for each other. One named field per fact; None (or empty) until someone knows it."""

    workdir: Path
    # -- the target --------------------------------------------------------------------------
    url: str | None = None                 # a live server to measure (no restart)
    launch: LaunchSpec | None = None       # the command, when specdoctor may relaunch
    launcher: Launcher | None = None
    logs: tuple[Path, ...] = ()
    settings: Settings | None = None       # what the launch command describes
    engine: str | None = None              # the served engine (launch.engines' name), if known
    gguf: dict[str, Path] = field(default_factory=dict)   # "target"/"draft" -> the GGUF served
    method: str | None = None
    k: int | None = None
    target_dir: Path | None = None
    draft_dir: Path | None = None
    tokenizer_dir: Path | None = None
    baseline_server: Server | None = None  # the server the diagnosis started and measured
    started_fresh: bool = False  # the first measurement ran on a server the diagnosis started
    # -- what was measured and read ----------------------------------------------------------
    prompts: tuple[str, ...] = ()
    suite: str = "code"                    # the prompt suites, comma-separated
    max_tokens: int = 64
    sampling: tuple[float, float] | None = None   # the sampled measurement's (T, top_p)
    measured: Measured = field(default_factory=Measured)
    server_logs: dict[str, str] = field(default_factory=dict)   # label or path -> log text
    errors: list[str] = field(default_factory=list)    # the server's and the measurements'
    windows: tuple[AcceptanceProfile, ...] = ()         # log windows over uptime
    log_total: AcceptanceProfile | None = None          # the logs' whole-run profile
    speculation_off: str | None = None     # why the logs show speculation off (the line)
    # -- what experiments leave for each other -----------------------------------------------
    oracle_greedy: Any = None              # the greedy oracle of the served files (oracle.runner)
    oracle_gap: Gap | None = None          # measured vs that oracle, accepted per draft
    # a drafter that does not draft at every step: accepted per decode step, engine vs oracle
    # (oracle_gap is this one where the engine loses per step and not per draft)
    oracle_step_gap: Gap | None = None
    oracle_pos0: float | None = None       # its position-0 rate
    oracle_below_method: bool = False      # the oracle is below what the method reaches
    oracle_sampled: Any = None             # the sampled oracle at the measured (T, top_p)
    oracle_sampled_gap: Gap | None = None  # the sampled measurement vs that oracle
    oracle_vocab_map: Path | None = None   # the draft-to-target id map the engine applies
    spec_on_passes: list[list[tuple[int, float]]] = field(default_factory=list)  # timing
    speed_probes: list[float] = field(default_factory=list)  # CPU probe around them
    tok_s_spec_on: float | None = None     # decode tok/s, speculation on and off
    tok_s_spec_off: float | None = None
    # What this method reaches at this k (published, or the user's reference): (name, accepted
    # draft tokens per step); splits slower-than-spec-off into the draft's cost or acceptance.
    method_reference: tuple[str, float] | None = None
    deadline: float | None = None          # time.monotonic() past which repeated runs stop
    engine_view: Any = None                # the live engine's draft as built (probes.view)
    code_view: Any = None                  # the engine's own config functions run on the
    #                                        served config (astexec.experiment.CodeView)
    leads: list[Lead] = field(default_factory=list)   # changes for the counterfactuals to try
    relaunches: dict[str, Any] = field(default_factory=dict)  # launch group -> the relaunch its
    #                                        experiments share (common.SharedRelaunch)
    progress: Callable[[str], None] = lambda msg: None


class Experiment(Protocol):
    id: str

    def unavailable(self, ctx: Context) -> str | None: ...

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult: ...
