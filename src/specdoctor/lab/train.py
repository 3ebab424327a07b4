"""Deterministic training of the lab's models on the Python standard library's own source.

A random-weight target barely reacts to faults (LAB.md): its next-token distributions are nearly
flat, so almost any drafter "agrees" with it. A few minutes of training on 2 cores give it real
preferences. This module trains:

- ``target``: the lab target's shape (2 layers, hidden 128), started from the lab's random
  target (``lab.models.target_model()``), AdamW lr 3e-3, batches of 16 x 256 tokens;
- ``draft-small``: a weaker drafter (1 layer, hidden 64) trained for fewer steps on the same
  data with the same tokenizer, so its acceptance against the target lies well inside (0, 1).

Each model is cached under ``$SPECDOCTOR_MODELS/<name>-<fingerprint>``; the fingerprint
covers the recipe (shape, steps, optimiser, seeds, thread count), the initial weights and the
training corpus's bytes, so a changed recipe trains anew and an unchanged one is reused.

Determinism: the same recipe on the same machine, torch build and thread count gives the same
weights bit for bit (seeded init, seeded batch order, fixed thread count). Across CPUs with
other vector units the float sums may round differently; the weights then differ slightly and
the figures measured with them move within their confidence intervals.

Budgets: ``full`` is LAB.md's recipe (~1,400 steps, ~5 minutes on 2 cores); ``ci`` is a short
schedule for the test suite (about a minute), weaker but trained.

Recipes are plain data (``TrainRecipe``), so other drafters (EAGLE3, DFlash, MTP heads) can be
added here later with their own init and loss functions.

Run directly: ``python -m specdoctor.lab.train [--budget full|ci]`` prints the two directories.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import LabError
from specdoctor.lab.atomic import build_dir
from specdoctor.lab.drafters.fit import FitRecipe, fit
from specdoctor.lab.models import TinyLlamaSpec, target_model
from specdoctor.paths import lab_dir, models_dir

log = logging.getLogger(__name__)

TRAIN_VERSION = 1
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class TrainRecipe:
    """Everything that decides the trained weights (and so the cache key)."""

    name: str
    model: TinyLlamaSpec
    steps: int
    batch: int = 16
    seq_len: int = 256
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 50
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    data_seed: int = 0
    threads: int = 2
    extra: dict[str, str] = field(default_factory=dict)

    def key(self) -> dict[str, object]:
        d = asdict(self)
        d["train_version"] = TRAIN_VERSION
        return d


TARGET_SHAPE = TinyLlamaSpec()
# head_dim 32: vLLM's CPU attention supports 32 and up. A head_dim-16 drafter boots, then the
# first request kills the engine ("Unsupported CPU attention configuration: head_dim=16").
DRAFT_SHAPE = TinyLlamaSpec(hidden_size=64, intermediate_size=192, num_hidden_layers=1,
                            num_attention_heads=2, num_key_value_heads=1, seed=1)

BUDGETS: dict[str, dict[str, TrainRecipe]] = {
    "full": {
        "target": TrainRecipe("target", TARGET_SHAPE, steps=1400),
        "draft-small": TrainRecipe("draft-small", DRAFT_SHAPE, steps=600, data_seed=1),
    },
    # A quarter of the tokens per step, for the test suite's time budget.
    "ci": {
        "target": TrainRecipe("target", TARGET_SHAPE, steps=300, batch=8, seq_len=128,
                              warmup_steps=20),
        "draft-small": TrainRecipe("draft-small", DRAFT_SHAPE, steps=600, batch=8, seq_len=128,
                                   warmup_steps=10, data_seed=1),
    },
}


def recipe(name: str, budget: str = "full") -> TrainRecipe:
    try:
        return BUDGETS[budget][name]
    except KeyError:
        raise LabError(f"no training recipe {name!r} with budget {budget!r}",
                       f"budgets: {', '.join(BUDGETS)}; models: target, draft-small") from None


# -- corpus ------------------------------------------------------------------------------------

def training_files() -> list[Path]:
    """The top-level ``*.py`` modules of the running Python's standard library, sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.is_file())
    if len(files) < 20:
        raise LabError(f"only {len(files)} standard-library source files under {root}",
                       "the lab trains on the stdlib's .py sources; use a Python with its source")
    return files


def corpus_digest() -> str:
    h = hashlib.sha256()
    for f in training_files():
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def corpus_tokens(tokenizer_dir: Path) -> Any:
    """The corpus as one int64 array (files joined by EOS); cached, since tokenizing ~5 MB
    takes tens of seconds on a busy core."""
    import numpy as np
    from transformers import AutoTokenizer

    h = hashlib.sha256(corpus_digest().encode())
    h.update((tokenizer_dir / "tokenizer.json").read_bytes())
    path = lab_dir() / "corpus" / f"stdlib-{h.hexdigest()[:12]}.npy"
    if path.is_file():
        return np.load(path)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    ids: list[int] = []
    for f in training_files():
        ids.extend(tok(f.read_text(encoding="utf-8", errors="replace"),
                       add_special_tokens=False)["input_ids"])
        ids.append(tok.eos_token_id)
    data = np.asarray(ids, dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
    np.save(tmp, data)
    tmp.replace(path)
    return data


# -- cache -------------------------------------------------------------------------------------

def fingerprint(r: TrainRecipe, init_dir: Path) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(r.key(), sort_keys=True, default=str).encode())
    for name in ("model.safetensors", "tokenizer.json"):
        h.update((init_dir / name).read_bytes())
    h.update(corpus_digest().encode())
    return h.hexdigest()[:12]


def trained_target(budget: str = "full", on_step: Callable[[int, int, float], None] | None = None
                   ) -> Path:
    """Directory of the trained lab target (trains once, then reuses the cache)."""
    r = recipe("target", budget)
    return train(r, target_model(r.model), on_step=on_step)


def small_drafter(budget: str = "full", on_step: Callable[[int, int, float], None] | None = None
                  ) -> Path:
    """Directory of the weaker drafter, sharing the lab tokenizer exactly."""
    r = recipe("draft-small", budget)
    # The drafter's own random init. Its tokenizer is trained the same deterministic way as the
    # target's; token-level acceptance needs the very same vocabulary, so check it is.
    init = target_model(r.model)
    tok_src = target_model(TARGET_SHAPE)
    for name in TOKENIZER_FILES:
        if not (tok_src / name).is_file():  # transformers 5 writes no special_tokens_map.json
            continue
        mine = init / name
        if not mine.is_file() or mine.read_bytes() != (tok_src / name).read_bytes():
            raise LabError(f"the drafter's tokenizer file {name} differs from the target's",
                           "delete $SPECDOCTOR_MODELS (default $SPECDOCTOR_HOME/lab/models) and build again")
    return train(r, init, on_step=on_step)


def train(r: TrainRecipe, init_dir: Path,
          on_step: Callable[[int, int, float], None] | None = None) -> Path:
    """Train ``r`` from the model in ``init_dir``; cached by fingerprint."""
    out = models_dir() / f"{r.name}-{fingerprint(r, init_dir)}"
    if (out / "model.safetensors").is_file() and (out / "specdoctor-train.json").is_file():
        return out
    log.info("training %s (first use; cached afterwards)", out.name)

    def fill(tmp: Path) -> None:
        report = _train_into(r, tmp, on_step)
        (tmp / "specdoctor-train.json").write_text(json.dumps(report, indent=2) + "\n")

    build_dir(out, fill, start_from=init_dir)
    return out


# -- the loop ----------------------------------------------------------------------------------

def fit_recipe(r: TrainRecipe) -> FitRecipe:
    """The one training loop's settings for a language-model recipe."""
    return FitRecipe(steps=r.steps, batch=r.batch, lr=r.lr, warmup=r.warmup_steps,
                     min_lr_ratio=r.min_lr_ratio, weight_decay=r.weight_decay,
                     grad_clip=r.grad_clip, seed=r.data_seed, threads=r.threads)


def fit_lm(model: Any, data: Any, r: TrainRecipe,
           on_step: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Train any HF causal LM with the drafters' loop (``drafters.fit.fit``): each step's
    rows are sequence starts in ``data`` (a 1-D token array), the loss the model's own
    next-token loss. Returns the loop's report (with every step's loss)."""
    import numpy as np
    import torch

    model.train()
    offsets = np.arange(r.seq_len)

    def loss_fn(starts: torch.Tensor) -> torch.Tensor:
        batch = torch.from_numpy(data[starts.numpy()[:, None] + offsets])
        return model(input_ids=batch, labels=batch).loss  # HF shifts the labels inside

    return fit(dict(model.named_parameters()), loss_fn, len(data) - r.seq_len, fit_recipe(r),
               name=r.name, on_step=on_step)


def train_lm(model: Any, r: TrainRecipe, out: Path,
             on_step: Callable[[int, int, float], None] | None = None) -> dict[str, object]:
    """Train ``model`` (any HF causal LM) on the corpus as tokenised by ``out``'s tokenizer,
    with ``r``'s loop and thread count, and save it into ``out``; the training report."""
    import torch

    t0 = time.perf_counter()
    data = corpus_tokens(out)
    if len(data) <= r.seq_len:
        raise LabError("the training corpus is shorter than one sequence", "check the stdlib")
    threads_before = torch.get_num_threads()
    torch.set_num_threads(r.threads)
    try:
        rep = fit_lm(model, data, r, on_step)
        model.eval()
        model.save_pretrained(str(out), safe_serialization=True)
    finally:
        torch.set_num_threads(threads_before)
    return {
        "final_loss_mean_last_20": rep["final_loss_mean_last_20"],
        "loss_every_100": rep["loss_every_100"],
        "train_tokens": int(len(data)),
        "seconds": round(time.perf_counter() - t0, 1),
        "torch": torch.__version__,
    }


def _train_into(r: TrainRecipe, model_dir: Path,
                on_step: Callable[[int, int, float], None] | None) -> dict[str, object]:
    try:
        import torch
        from transformers import LlamaForCausalLM
    except ImportError as exc:
        raise LabError(f"cannot train the lab model: {exc}",
                       "install the lab: bash scripts/install.sh lab") from exc
    torch.manual_seed(r.model.seed)
    model = LlamaForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32,
                                             attn_implementation="sdpa")
    return {"recipe": r.key(), **train_lm(model, r, model_dir, on_step)}


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Train the lab target and the small drafter.")
    ap.add_argument("--budget", choices=sorted(BUDGETS), default="full")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(trained_target(args.budget))
    print(small_drafter(args.budget))


if __name__ == "__main__":
    main()
