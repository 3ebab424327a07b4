"""Drafter training learns and is deterministic: a short schedule of each head, twice.

The full schedules take minutes and run only where the trained drafters are served (the lab,
the fault clinic); here each head trains for 24 steps on the control target's greedy text (a
known cycle, so the loss must fall far: from ~6.8, a uniform guess over the vocabulary, to
below 1 in every method).

What is promised about reproducibility (docs/lab.md, "Reproducibility"): the same recipe
(whose ``FitRecipe.threads`` fixes the training threads, whatever the caller set) with the same
torch build and CPU capability gives the same bytes, in one process or in two. Checked here on a
short schedule of each head, and on the real ``ci`` MTP recipe in a fresh process. Not promised
across CPUs: other vector units sum floats in another order (benchmarks/training_repro.py).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specdoctor.lab.drafters import cache, cycle, dflash, eagle3, mtp, targets  # noqa: E402
from specdoctor.lab.drafters.fit import FitRecipe, lr_at  # noqa: E402

TINY_DATA = targets.DataRecipe(sequences=4, prompt_len=8, gen_len=16, batch=4)
TINY_FIT = FitRecipe(steps=24, batch=4, warmup=2)
CASES = {
    "eagle3": (eagle3, "llama", replace(eagle3.Recipe(), data=TINY_DATA, fit=TINY_FIT)),
    "dflash": (dflash, "qwen3", replace(dflash.Recipe(), data=TINY_DATA, fit=TINY_FIT, anchors=4)),
    "mtp": (mtp, "llama", replace(mtp.Recipe(), data=TINY_DATA, fit=TINY_FIT)),
}


@pytest.mark.parametrize("method", list(CASES))
def test_loss_falls_and_the_same_recipe_gives_the_same_bytes(method, tmp_path):
    module, arch, recipe = CASES[method]
    target = cycle.target(arch)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    rep = module._train_into(a, target, recipe)
    first, last = rep["loss_every_100"][0], rep["final_loss_mean_last_20"]
    assert first > 5.0, rep  # from about log(vocab): the head starts knowing nothing
    assert last < 0.5 * first, rep  # and learns the cycle
    module._train_into(b, target, recipe)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "config.json").read_text() == (b / "config.json").read_text()
    # what the head was trained for is the lab's own record, never a served config key
    assert not [k for k in json.loads((a / "config.json").read_text())
                if k.startswith(cache.LAB_PREFIX)]


def test_another_seed_gives_other_bytes(tmp_path):
    target = cycle.target("llama")
    _, _, recipe = CASES["eagle3"]
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    eagle3._train_into(a, target, recipe)
    eagle3._train_into(b, target, replace(recipe, init_seed=1))
    ta, tb = cache.load_tensors(a), cache.load_tensors(b)
    assert not all(bool((ta[k] == tb[k]).all()) for k in ta if k not in ("d2t", "t2d"))


def test_schedule_warms_up_then_decays_to_the_floor():
    r = FitRecipe(steps=100, warmup=10, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(r, 0) == pytest.approx(1e-4)
    assert lr_at(r, 9) == pytest.approx(1e-3)
    assert lr_at(r, 99) == pytest.approx(1e-4, rel=0.01)


# The ``ci`` MTP recipe (the drafter whose rebuild elsewhere measured other figures), trained
# from the shared cached target and greedy text in a fresh interpreter.
TRAIN_MTP_CI = """
import sys
from pathlib import Path
from specdoctor.lab.drafters import mtp, targets
mtp._train_into(Path(sys.argv[1]), targets.llama("ci"), mtp.RECIPES["ci"])
"""


def _sha256(d: Path) -> str:
    return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()


def test_ci_mtp_training_gives_the_same_bytes_in_another_process_whatever_the_callers_threads(
        tmp_path):
    import torch

    llama = targets.llama("ci")
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the caller's setting; the recipe's threads (1) must decide
    try:
        mtp._train_into(here, llama, mtp.RECIPES["ci"])
    finally:
        torch.set_num_threads(before)
    proc = subprocess.run([sys.executable, "-c", TRAIN_MTP_CI, str(there)], capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _sha256(here) == _sha256(there)


def test_eagle3_norm_output_feeds_the_next_step_the_normed_state_and_says_so():
    """EAGLE-3.1's option: step 0 is the same head either way, later steps read the previous
    step's final-normed output; the config says norm_output only when it is on, and the
    option off keeps the key (and so the cache entry) of heads trained before it."""
    import torch

    s = eagle3.Shape(hidden=16, heads=2, kv_heads=1, intermediate=32, vocab=64, draft_vocab=32)
    p = {k: v.detach() for k, v in eagle3.init(s, 0).items()}
    p["norm.weight"] = torch.full((16,), 3.0)  # normed state far from the residual stream
    g = torch.Generator().manual_seed(1)
    embed = torch.randn(64, 16, generator=g)
    aux, ids = torch.randn(2, 6, 48, generator=g), torch.randint(0, 64, (2, 6), generator=g)
    plain = eagle3.forward(p, s, embed, aux, ids, 2)
    normed = eagle3.forward(p, replace(s, norm_output=True), embed, aux, ids, 2)
    assert torch.equal(plain[0], normed[0])
    assert not torch.allclose(plain[1], normed[1])
    assert eagle3.config(replace(s, norm_output=True))["norm_output"] is True
    assert "norm_output" not in eagle3.config(s)
    r = eagle3.Recipe()
    assert "norm_output" not in eagle3._key(r)["shape"]
    assert eagle3._key(replace(r, shape=replace(r.shape, norm_output=True)))["shape"]["norm_output"]
