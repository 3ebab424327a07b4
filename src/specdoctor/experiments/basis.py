"""Are the target's hidden states in the basis the drafter was trained on? (catalogue
experiment ``hidden-basis``, hypothesis ``target-basis``.)

A drafter that reads the target's hidden states (EAGLE3's ``fc`` over aux states, and the
target's embeddings it shares) learned them from one checkpoint. A target served from another
checkpoint that computes the same function in a rotated basis (QuaRot/SpinQuant-style
quantization folds an orthogonal rotation into the residual stream; vllm-ascend issue #5974)
hands it states it reads as noise: the target's output is unchanged, acceptance collapses, and
the oracle, which runs the same files, agrees with the engine.

What it does, without a server:

- Pairs the drafter's tensors that were made in the target's hidden basis with the target's own:
  the head's ``lm_head`` rows with the target's LM-head rows of the same target ids (through
  ``d2t``), the head's own embedding with the target's. Each pair is compared as served (mean
  cosine of matching rows) and after the orthogonal map that aligns them best (Procrustes),
  fitted on half the rows and scored on the other half, so a map fitted to noise scores nothing.
- Aligned far better than as served: the target is rotated against the drafter. The oracle
  counterfactual runs a copy of the head whose reads of the target's states are rotated back
  (each of ``fc``'s column blocks times the map; the target's embedding rotated back, as the
  head's own). Recovery confirms; none excludes.
- As served as well as aligned, and close: same basis, excluded.
- Neither close (a head whose tensors were trained from scratch): nothing to compare with;
  inconclusive, saying what was not checked.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.served_files import read_config

HID = "target-basis"
# Methods whose drafter reads the target's hidden states (vLLM's names).
READS_TARGET_STATES = frozenset({"eagle", "eagle3", "dflash", "mtp", "medusa",
                                 "mlp_speculator"})
# Methods whose drafter this build can rotate back for the counterfactual.
ROTATABLE = ("eagle3",)
# A drafter tensor tracks the target's when its held-out rows, aligned, reach this mean cosine
# with the target's (unrelated rows score about 0; rows copied from the target and then trained
# keep most of their direction).
TRACKS = 0.5
# The target is a lead for a rotated basis when the aligned rows beat the rows as served by this
# much mean cosine (a rotation by a random orthogonal matrix takes them to about 0).
ROTATED_GAIN = 0.1
# Rows used at most per pair (the map is H x H; more rows add little but time).
MAX_ROWS = 16384
FIX = ("fix: serve the drafter trained for this target checkpoint, or rotate the drafter's "
       "reads of the target's states by the target's rotation (vllm-ascend PR #6914 does this "
       "for QuaRot targets)")


# -- the math (pure) ---------------------------------------------------------------------------

def unit_rows(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


def procrustes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The orthogonal ``r`` minimising ||a r - b|| (rows of ``a`` and ``b`` paired)."""
    u, _, vt = np.linalg.svd(a.T @ b)
    return u @ vt


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.sum(unit_rows(a) * unit_rows(b), axis=1)))


@dataclass(frozen=True)
class Alignment:
    """One pair of tensors, drafter against target, rows paired by token."""

    name: str
    rows: int
    served: float      # mean cosine of the held-out rows as served
    aligned: float     # after the map fitted on the other half
    rotation: np.ndarray   # the map fitted on every row: target ≈ drafter @ rotation

    @property
    def tracks(self) -> bool:
        return self.aligned >= TRACKS

    @property
    def rotated(self) -> bool:
        return self.tracks and self.aligned - self.served >= ROTATED_GAIN

    def text(self) -> str:
        return (f"{self.name}: {self.rows} rows, mean cosine {self.served:.2f} as served, "
                f"{self.aligned:.2f} after the best rotation (fitted on half the rows, scored on "
                f"the other half)")


def align(name: str, drafter: np.ndarray, target: np.ndarray, seed: int = 0) -> Alignment:
    """Compare two [rows, H] tensors paired row by row, as served and best rotated (pure)."""
    a, b = unit_rows(np.asarray(drafter, np.float64)), unit_rows(np.asarray(target, np.float64))
    rng = np.random.default_rng(seed)
    if len(a) > MAX_ROWS:
        keep = rng.choice(len(a), MAX_ROWS, replace=False)
        a, b = a[keep], b[keep]
    order = rng.permutation(len(a))
    fit, score = order[: len(a) // 2], order[len(a) // 2:]
    r_half = procrustes(a[fit], b[fit])
    return Alignment(name, len(a), mean_cosine(a[score], b[score]),
                     mean_cosine(a[score] @ r_half, b[score]), procrustes(a, b))


def rotate_fc(fc: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """``fc`` [out, n * H] reading n target states, each of its column blocks times the map, so
    that it reads rotated states as it read the unrotated ones (pure): x R^T W^T = x (W R)^T."""
    h = rotation.shape[0]
    if fc.shape[1] % h:
        raise ValueError(f"fc has {fc.shape[1]} input columns, not a multiple of {h}")
    return np.concatenate([fc[:, i:i + h] @ rotation for i in range(0, fc.shape[1], h)], axis=1)


# -- the files ---------------------------------------------------------------------------------

def _tensors(model_dir: Path, want: tuple[str, ...]) -> dict[str, Any]:
    """Tensors of ``model_dir`` whose name (any ``model.`` prefix dropped) is one of ``want``."""
    from safetensors import safe_open

    out: dict[str, Any] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            for n in fh.keys():  # noqa: SIM118 - a safetensors handle is not a dict
                short = n.removeprefix("model.")
                if short in want and short not in out:
                    out[short] = fh.get_tensor(n).float().numpy()
    return out


def pairs(draft_dir: Path, target_dir: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, drafter rows, target rows) for every tensor of the drafter made in the target's
    hidden basis. The target's embedding is read only where a pair needs it."""
    d = _tensors(draft_dir, ("lm_head.weight", "embed_tokens.weight", "d2t"))
    lm, emb = d.get("lm_head.weight"), d.get("embed_tokens.weight")
    t = _tensors(target_dir, ("lm_head.weight",))
    if "lm_head.weight" not in t or emb is not None:   # a tied LM head, or an embedding to pair
        t.update(_tensors(target_dir, ("embed_tokens.weight",)))
    t_head = t.get("lm_head.weight", t.get("embed_tokens.weight"))
    out = []
    if lm is not None and t_head is not None and lm.shape[1] == t_head.shape[1]:
        ids = np.arange(len(lm))
        if "d2t" in d:
            ids = ids + d["d2t"].astype(np.int64)
        if ((ids >= 0) & (ids < len(t_head))).all():
            out.append(("lm_head", lm, t_head[ids]))
    t_emb = t.get("embed_tokens.weight")
    if emb is not None and t_emb is not None and emb.shape == t_emb.shape:
        out.append(("embed_tokens", emb, t_emb))
    return out


def _has(model_dir: Path, name: str) -> bool:
    """Whether a safetensors file of ``model_dir`` holds ``name`` (any ``model.`` prefix)."""
    from safetensors import safe_open

    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            if any(n.removeprefix("model.") == name for n in fh.keys()):  # noqa: SIM118
                return True
    return False


def rotated_copy(draft_dir: Path, target_dir: Path, rotation: np.ndarray, workdir: Path
                 ) -> Path:
    """A copy of the EAGLE3 head (neutral name) whose reads of the target's states are rotated
    back: ``fc``'s column blocks times the map and, when the head shares the target's
    embeddings, the target's embedding rotated back as its own."""
    import torch
    from safetensors.torch import load_file, save_file

    out = workdir / "cf-basis" / "draft"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(draft_dir, out, symlinks=False)
    files = sorted(out.glob("*.safetensors"))
    own_embed = False
    for f in files:
        t = load_file(str(f))
        changed = False
        for n in list(t):
            short = n.removeprefix("model.")
            if short == "fc.weight":
                w = rotate_fc(t[n].double().numpy(), rotation)
                t[n] = torch.from_numpy(w).to(t[n].dtype)
                changed = True
            own_embed = own_embed or short == "embed_tokens.weight"
        if changed:
            save_file(t, str(f), metadata={"format": "pt"})
    target_embed = (None if own_embed else
                    _tensors(target_dir, ("embed_tokens.weight",)).get("embed_tokens.weight"))
    if target_embed is not None and files:
        t = load_file(str(files[0]))
        dtype = next(iter(t.values())).dtype if t else torch.float32
        t["embed_tokens.weight"] = torch.from_numpy(target_embed @ rotation.T).to(
            dtype if dtype.is_floating_point else torch.float32)
        save_file(t, str(files[0]), metadata={"format": "pt"})
    return out


# -- the experiment ----------------------------------------------------------------------------

class HiddenBasis:
    id = "hidden-basis"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method is None:
            return common.UNKNOWN_METHOD
        if ctx.method not in READS_TARGET_STATES:
            return None
        if ctx.target_dir is None:
            return common.UNKNOWN_TARGET
        if ctx.draft_dir is None and ctx.method != "mtp":
            return common.UNKNOWN_DRAFT
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        if ctx.method not in READS_TARGET_STATES:
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.EXCLUDED, f"{ctx.method} drafts without the target's hidden "
                                       f"states: no basis to differ")])
        if ctx.draft_dir is None:   # MTP layers ship inside the target's checkpoint
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.INCONCLUSIVE, f"{ctx.method}'s layers ship in the target's own "
                f"checkpoint: no drafter tensor apart from it to compare the basis with",
                unchecked=("the target's hidden basis against the drafter's",))])
        assert ctx.target_dir is not None
        ctx.progress("hidden basis: the drafter's tensors against the target's")
        als = [align(n, a, b) for n, a, b in pairs(ctx.draft_dir, ctx.target_dir)]
        nums: dict[str, Any] = {"pairs": [{"name": x.name, "rows": x.rows,
                                           "served": round(x.served, 4),
                                           "aligned": round(x.aligned, 4)} for x in als]}
        f, curves = self._decide(ctx, als, nums)
        return ExperimentResult(self.id, [f], nums, curves, wall_s=time.perf_counter() - t0)

    def _decide(self, ctx: Context, als: list[Alignment], nums: dict[str, Any]
                ) -> tuple[Finding, dict[str, Any]]:
        from specdoctor.experiments.oracle_gap import oracle_unavailable

        if not als:
            return Finding(HID, Verdict.INCONCLUSIVE,
                           "the drafter has no tensor made in the target's hidden basis to "
                           "compare with the target's (no LM head over target ids, no "
                           "embedding of its own)",
                           unchecked=("the target's hidden basis against the drafter's",)), {}
        ev = "; ".join(x.text() for x in als)
        tracking = [x for x in als if x.tracks]
        if not tracking:
            return Finding(HID, Verdict.INCONCLUSIVE,
                           f"{ev}: no tensor of the drafter tracks the target's in any basis "
                           f"(mean cosine under {TRACKS} even aligned): nothing to tell the "
                           f"basis by",
                           unchecked=("the target's hidden basis against the drafter's",)), {}
        best = max(tracking, key=lambda x: x.aligned - x.served)
        if not best.rotated:
            return Finding(HID, Verdict.EXCLUDED,
                           f"{ev}: the drafter's tensors track the target's as served (no "
                           f"rotation aligns them {ROTATED_GAIN} closer): same basis"), {}
        lead = (f"{ev}: the target's basis is rotated against the drafter's ({best.name} "
                f"aligns only after the rotation)")
        if ctx.method not in ROTATABLE:
            return Finding(HID, Verdict.INCONCLUSIVE,
                           f"{lead}; the counterfactual that rotates the drafter back is built "
                           f"for {', '.join(ROTATABLE)} only",
                           unchecked=(f"a {ctx.method} drafter rotated back",)), {}
        assert ctx.draft_dir is not None and ctx.target_dir is not None
        if not _has(ctx.draft_dir, "fc.weight"):
            return Finding(HID, Verdict.INCONCLUSIVE, f"{lead}; the head has no fc.weight to "
                           f"rotate back"), {}
        cfg = read_config(ctx.draft_dir)
        eagle = cfg.get("eagle_config") or {}
        if cfg.get("fc_norm") or eagle.get("norm_before_fc", cfg.get("norm_before_fc")):
            return Finding(HID, Verdict.INCONCLUSIVE,
                           f"{lead}; the head norms the target's states before fc, so the "
                           f"rotation cannot be undone in its weights: serve the head trained "
                           f"for this target and compare"), {}
        why = oracle_unavailable(ctx)
        if why is not None:
            return Finding(HID, Verdict.INCONCLUSIVE, f"{lead}; the counterfactual needs the "
                           f"oracle: {why}"), {}
        return self._counterfactual(ctx, best, lead, nums)

    def _counterfactual(self, ctx: Context, best: Alignment, lead: str, nums: dict[str, Any]
                        ) -> tuple[Finding, dict[str, Any]]:
        from dataclasses import replace

        from specdoctor.experiments.oracle_gap import copy_counterfactual

        assert ctx.draft_dir is not None and ctx.target_dir is not None
        change = (f"the head's reads of the target's states rotated back by the map "
                  f"{best.name} gives")
        ctx.progress("oracle counterfactual: the head rotated into the target's basis")
        copy = rotated_copy(ctx.draft_dir, ctx.target_dir, best.rotation, ctx.workdir)
        f, before_p, after_p = copy_counterfactual(ctx, HID, copy, lead, change, nums)
        if f.verdict is Verdict.CONFIRMED:
            f = replace(f, evidence=f"{f.evidence}; {FIX}")
        return f, {"before": before_p, "after rotated back": after_p}
