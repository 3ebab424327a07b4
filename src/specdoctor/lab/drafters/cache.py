"""Build-once model directories for the drafters, keyed by everything that decides their bytes.

A directory ``$SPECDOCTOR_MODELS/<name>-<fingerprint>`` (``specdoctor.paths``) is built
atomically (``lab.atomic``). The fingerprint covers the recipe (plain JSON), the bytes of the
input files (a target's weights, a tokenizer) and ``BUILD_VERSION``. The build record
(``specdoctor-build.json``: recipe, losses) stays in that directory, which is the lab's own.

The engine never reads those directories: ``published()`` gives it a copy of the files it
needs, minus the lab's records and config keys, in ``$SPECDOCTOR_MODELS/served/<content hash>``.
Nothing a server can read or log (directory name, config, files) then names how its model was
built, which fault was put in it, or what it was trained for: the lab never tells the answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from specdoctor.lab.atomic import build_dir
from specdoctor.paths import models_dir

log = logging.getLogger(__name__)

# Bump when a change in this package changes the weights or configs it writes.
BUILD_VERSION = 1
DONE = "specdoctor-build.json"
# Files and config keys of a built directory that are the lab's own records, never served.
LAB_PREFIX = "specdoctor"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def fingerprint(recipe: dict[str, Any], inputs: Iterable[Path] = ()) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"build": BUILD_VERSION, **recipe}, sort_keys=True, default=str).encode())
    for f in inputs:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def built(name: str, recipe: dict[str, Any], inputs: Iterable[Path],
          build: Callable[[Path], dict[str, Any] | None]) -> Path:
    """The directory for (name, recipe, inputs), calling ``build(tmp_dir)`` once if missing.

    ``build`` may return a report (timings, losses); it is stored beside the recipe."""
    out = models_dir() / f"{name}-{fingerprint(recipe, list(inputs))}"
    if (out / DONE).is_file():
        return out
    log.info("building %s (first use; cached afterwards)", out.name)
    t0 = time.perf_counter()

    def fill(tmp: Path) -> None:
        report = build(tmp) or {}
        (tmp / DONE).write_text(json.dumps({"recipe": recipe, "report": report,
                                            "built_on": built_on()}, indent=2,
                                           default=str) + "\n")

    build_dir(out, fill)
    log.info("built %s in %.0f s", out.name, time.perf_counter() - t0)
    return out


def built_on() -> dict[str, Any]:
    """What besides the recipe decides the bytes of trained weights: the torch build and the
    CPU kernels it dispatches to (docs/lab.md, "Reproducibility")."""
    import platform

    out: dict[str, Any] = {"machine": platform.machine()}
    try:
        import torch

        out.update(torch=torch.__version__,
                   cpu_capability=torch.backends.cpu.get_cpu_capability())
    except ImportError:
        pass
    return out


def report(model_dir: Path) -> dict[str, Any]:
    """What the build of ``model_dir`` recorded (recipe and report), or {}."""
    try:
        return dict(json.loads((model_dir / DONE).read_text()))
    except (OSError, ValueError):
        return {}


def copy_tokenizer(src: Path, dst: Path) -> None:
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, dst / name)


def write_config(dst: Path, config: dict[str, Any]) -> None:
    (dst / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def save_tensors(dst: Path, tensors: dict[str, Any], name: str = "model.safetensors") -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(dst / name),
              metadata={"format": "pt"})


def load_tensors(src: Path, name: str = "model.safetensors") -> dict[str, Any]:
    from safetensors.torch import load_file

    return dict(load_file(str(src / name)))


def published(src: Path) -> Path:
    """What a server is given of the built directory ``src``: its files without the lab's own
    (``specdoctor-*``), its config without ``specdoctor*`` keys, in a directory named by the
    sha256 of that content (built once)."""
    files = sorted(f for f in src.iterdir() if f.is_file() and not f.name.startswith(LAB_PREFIX))
    config = None
    h = hashlib.sha256()
    for f in files:
        if f.name == "config.json":
            cfg = json.loads(f.read_text())
            config = {k: v for k, v in cfg.items() if not k.startswith(LAB_PREFIX)}
            data = (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()
        else:
            data = f.read_bytes()
        h.update(f.name.encode() + b"\0" + hashlib.sha256(data).digest())
    out = models_dir() / "served" / h.hexdigest()[:16]
    if out.is_dir():
        return out

    def fill(tmp: Path) -> None:
        for f in files:
            if f.name == "config.json":
                write_config(tmp, config or {})
                continue
            # a copy, not a hard link: editing one must never change the other
            shutil.copyfile(f, tmp / f.name)

    build_dir(out, fill)
    return out
