"""Do the drafter's token ids mean the target's tokens?

- Independent draft model (vLLM ``draft_model``): the engine tokenizes once with the target's
  tokenizer, so the drafter's vocabulary must be the target's: compare vocab sizes and the
  tokenizer files' content.
- Prompt lookup copies target tokens: nothing to map.
- EAGLE3 maps its own (smaller) vocabulary to target ids with ``d2t`` (target id = draft id +
  d2t[draft id]); checkpoints also ship ``t2d``, the mask of the target ids the draft vocabulary
  holds, in order. The two must describe one map. When they disagree, the verdict is the map
  counterfactual: the same head with ``d2t`` rebuilt from ``t2d``, run through the oracle;
  confirmed if acceptance recovers. vLLM reads ``d2t`` alone, so a stale or shifted ``d2t`` is
  served silently.
- Drafters that draft in the target's vocabulary (DFlash, MTP): compare vocab sizes.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.diagnose import rules
from specdoctor.diagnose.experiments import common
from specdoctor.experiments.base import Context, ExperimentResult, Finding, Verdict

HID = "tokenizer-mismatch"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model")
MAP_METHODS = ("eagle3",)
SAME_VOCAB_METHODS = ("dflash", "mtp")


def _digest(d: Path) -> dict[str, str]:
    return {f: hashlib.sha256((d / f).read_bytes()).hexdigest()[:16]
            for f in TOKENIZER_FILES if (d / f).is_file()}


@dataclass(frozen=True)
class MapCheck:
    """What the d2t map says against t2d: ``consistent`` None when it cannot be told."""

    consistent: bool | None
    evidence: str
    repaired: np.ndarray | None = None     # d2t rebuilt from t2d, when they disagree


def check_map(d2t: np.ndarray, t2d: np.ndarray | None, vocab: int) -> MapCheck:
    """Pure: does ``d2t`` (draft id -> offset to its target id) describe the map ``t2d`` marks?"""
    d2t = np.asarray(d2t, dtype=np.int64)
    image = np.arange(len(d2t)) + d2t
    outside = int(((image < 0) | (image >= vocab)).sum())
    if outside:
        return MapCheck(False, f"d2t maps {outside} of {len(d2t)} draft ids outside the target "
                               f"vocabulary (0..{vocab - 1})")
    if t2d is None:
        if np.any(np.diff(image) <= 0):
            return MapCheck(None, "d2t's target ids are not strictly increasing (the usual "
                                  "EAGLE3 layout) and the checkpoint has no t2d to check them "
                                  "against")
        return MapCheck(None, "the checkpoint has no t2d to check d2t against")
    marked = np.flatnonzero(np.asarray(t2d).astype(bool))
    if len(marked) != len(d2t):
        return MapCheck(None, f"t2d marks {len(marked)} target ids, d2t maps {len(d2t)} draft "
                              f"ids: they describe vocabularies of different sizes")
    wrong = image != marked
    n = int(wrong.sum())
    if n == 0:
        return MapCheck(True, f"d2t and t2d describe one map ({len(d2t)} draft ids)")
    shifts = np.unique(image[wrong] - marked[wrong])
    how = (f"each one shifted by {int(shifts[0]):+d}" if len(shifts) == 1
           else f"{len(shifts)} different shifts")
    return MapCheck(False, f"d2t maps {n} of {len(d2t)} draft ids to target ids other than the "
                           f"ones t2d marks ({how})", marked - np.arange(len(marked)))


def _read_map(draft_dir: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    from safetensors import safe_open

    d2t = t2d = None
    for f in sorted(draft_dir.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            keys = set(fh.keys())
            for name in keys:
                short = name.rsplit(".", 1)[-1] if name.endswith(("d2t", "t2d")) else name
                if short == "d2t":
                    d2t = fh.get_tensor(name).long().numpy()
                elif short == "t2d":
                    t2d = fh.get_tensor(name).bool().numpy()
    return d2t, t2d


def map_copy(draft_dir: Path, d2t: np.ndarray, workdir: Path) -> Path:
    """A copy of the drafter under a neutral name with ``d2t`` replaced."""
    import torch
    from safetensors.torch import load_file, save_file

    out = workdir / "cf-map" / "draft"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(draft_dir, out, symlinks=False)
    for f in sorted(out.glob("*.safetensors")):
        t = load_file(str(f))
        names = [n for n in t if n == "d2t" or n.endswith(".d2t")]
        if names:
            for n in names:
                t[n] = torch.from_numpy(np.asarray(d2t, dtype=np.int64)).to(t[n].dtype)
            save_file(t, str(f), metadata={"format": "pt"})
    return out


class VocabMapCheck:
    id = "vocab-map-check"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method == "ngram":
            return None
        if ctx.target_dir is None:
            return "the target's model directory is unknown"
        if ctx.method in SAME_VOCAB_METHODS:
            return None
        if ctx.draft_dir is None:
            return "the drafter's directory is unknown"
        if ctx.method in ("draft_model", *MAP_METHODS):
            return None
        return f"no vocabulary check for method {ctx.method!r}"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        if ctx.method == "ngram":
            return ExperimentResult(self.id, [Finding(HID, Verdict.EXCLUDED,
                                                      "prompt lookup proposes the target's own "
                                                      "tokens: no vocabulary to mismatch")])
        if ctx.method in MAP_METHODS:
            return self._map(ctx)
        if ctx.method in SAME_VOCAB_METHODS:
            return self._same_vocab(ctx)
        return self._tokenizers(ctx)

    def _same_vocab(self, ctx: Context) -> ExperimentResult:
        assert ctx.target_dir is not None
        t = common.read_config(ctx.target_dir)
        d = common.read_config(ctx.draft_dir) if ctx.draft_dir else t
        if d.get("vocab_size") != t.get("vocab_size"):
            f = Finding(HID, Verdict.INCONCLUSIVE,
                        f"{ctx.method} drafts in the target's vocabulary, but vocab_size is "
                        f"draft {d.get('vocab_size')} vs target {t.get('vocab_size')}")
        else:
            f = Finding(HID, Verdict.EXCLUDED,
                        f"{ctx.method} drafts in the target's own vocabulary "
                        f"({t.get('vocab_size')} ids, no map to get wrong)")
        return ExperimentResult(self.id, [f], {"draft_vocab": d.get("vocab_size"),
                                               "target_vocab": t.get("vocab_size")})

    def _map(self, ctx: Context) -> ExperimentResult:
        from specdoctor.diagnose.experiments.oracle import (
            expected_profile, oracle_unavailable, run_oracle,
        )

        t0 = time.perf_counter()
        assert ctx.draft_dir is not None and ctx.target_dir is not None
        cfg, tcfg = common.read_config(ctx.draft_dir), common.read_config(ctx.target_dir)
        vocab = int(tcfg.get("vocab_size") or cfg.get("vocab_size") or 0)
        d2t, t2d = _read_map(ctx.draft_dir)
        if d2t is None:
            same = int(cfg.get("draft_vocab_size") or vocab) == vocab
            v = Verdict.EXCLUDED if same else Verdict.INCONCLUSIVE
            return ExperimentResult(self.id, [Finding(
                HID, v, "no d2t: the head drafts in the target's vocabulary" if same else
                "draft_vocab_size differs from the target's but the checkpoint has no d2t")])
        chk = check_map(d2t, t2d, vocab)
        nums: dict[str, Any] = {"draft_vocab": len(d2t), "target_vocab": vocab,
                                "has_t2d": t2d is not None, "consistent": chk.consistent}
        if chk.consistent:
            return ExperimentResult(self.id, [Finding(HID, Verdict.EXCLUDED, chk.evidence)], nums)
        if chk.repaired is None:
            return ExperimentResult(self.id, [Finding(HID, Verdict.INCONCLUSIVE, chk.evidence)],
                                    nums)
        why = oracle_unavailable(ctx)
        if why is not None:
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.INCONCLUSIVE, f"{chk.evidence}; the map counterfactual needs the "
                                           f"oracle: {why}")], nums)
        base = ctx.data.get("oracle_greedy") or run_oracle(ctx, 0.0, 1.0)
        ctx.data["oracle_greedy"] = base
        ctx.progress("oracle counterfactual: d2t rebuilt from t2d")
        after_res = run_oracle(ctx, 0.0, 1.0, map_copy(ctx.draft_dir, chk.repaired, ctx.workdir))
        before_p, after_p = expected_profile(base), expected_profile(after_res)
        b, a = common.apd(before_p), common.apd(after_p)
        f = rules.decide_counterfactual(
            HID, f"{chk.evidence}; d2t rebuilt from t2d (oracle)", b, a, float(ctx.k or 1),
            significant=a - b > 0.05 * max(b, 0.1))
        nums.update({"before": round(b, 4), "after": round(a, 4)})
        return ExperimentResult(self.id, [f], nums,
                                {"before": before_p, "after d2t rebuilt from t2d": after_p},
                                wall_s=time.perf_counter() - t0)

    def _tokenizers(self, ctx: Context) -> ExperimentResult:
        assert ctx.draft_dir is not None and ctx.target_dir is not None
        d, t = common.read_config(ctx.draft_dir), common.read_config(ctx.target_dir)
        tok_dir = ctx.tokenizer_dir or ctx.target_dir
        dd, td = _digest(ctx.draft_dir), _digest(tok_dir)
        shared = sorted(set(dd) & set(td))
        differ = [f for f in shared if dd[f] != td[f]]
        nums = {"draft_vocab": d.get("vocab_size"), "target_vocab": t.get("vocab_size"),
                "tokenizer_files_compared": shared, "differ": differ}
        if d.get("vocab_size") != t.get("vocab_size"):
            f = Finding(HID, Verdict.INCONCLUSIVE,
                        f"vocab_size draft {d.get('vocab_size')} vs target {t.get('vocab_size')}: "
                        f"the engine tokenizes with the target's; a lead, not a verdict")
        elif differ:
            f = Finding(HID, Verdict.INCONCLUSIVE,
                        f"tokenizer files differ ({', '.join(differ)}) with the same vocab size: "
                        f"a lead for a counterfactual with the target's tokenizer")
        else:
            f = Finding(HID, Verdict.EXCLUDED,
                        f"same vocab size ({t.get('vocab_size')})"
                        + (f" and identical {', '.join(shared)}" if shared else
                           "; the drafter ships no tokenizer, the engine uses the target's"))
        return ExperimentResult(self.id, [f], nums)
