"""Do the drafter's token ids mean the target's tokens?

- Independent draft model (vLLM ``draft_model``): the engine tokenizes once with the target's
  tokenizer and hands the drafter those ids as they are, so the drafter's vocabulary must be
  the target's id for id. Compared: vocab sizes, then the token string behind every id of the
  two ``tokenizer.json`` files. Where the strings differ, the counterfactual runs through the
  oracle: the same drafter with its ids translated to the target's (by token string) against
  the drafter as the engine runs it. Recovery confirms ``tokenizer-mismatch``; none excludes
  it. vLLM can translate itself (``use_heterogeneous_vocab`` in ``--speculative-config``: ids
  mapped by token string); where the command turns that on, the oracle translates the same way
  and there is nothing to suspect.
- Prompt lookup copies target tokens: nothing to map.
- EAGLE3 maps its own (smaller) vocabulary to target ids with ``d2t`` (target id = draft id +
  d2t[draft id]); checkpoints also ship ``t2d``, the mask of the target ids the draft
  vocabulary holds, in order. The two must describe one map. When they disagree, the verdict is
  the map counterfactual: the same head with ``d2t`` rebuilt from ``t2d``, run through the
  oracle; confirmed if acceptance recovers. vLLM reads ``d2t`` alone, so a stale or shifted
  ``d2t`` is served silently (and a checkpoint without one is served with zero offsets).
  Agreeing with ``t2d`` does not make ``d2t`` the map the head was trained with (both can be
  regenerated from other data), so the head's own proposals decide: a map learned from where
  its first drafts land on half the prompts, scored on the other half against the served one
  (``oracle.slotmap``); significantly better there, the oracle counterfactual with the learned
  map measures the recovery.
- Drafters that draft in the target's vocabulary (DFlash, MTP): compare vocab sizes.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.sizing import Size
from specdoctor.served_files import read_config

HID = "tokenizer-mismatch"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model")
# Hidden-state drafters that draft in a vocabulary of their own when their checkpoint ships a
# map (d2t) or a smaller draft_vocab_size, and in the target's otherwise: vLLM's EAGLE3 and
# DFlash heads scatter their logits through d2t alike. An MTP layer drafts in the target's.
HEAD_METHODS = ("eagle3", "dflash", "mtp")
MAP_METHODS = ("eagle3",)         # always through the map check (no map: the target's vocabulary)


def _digest(d: Path) -> dict[str, str]:
    return {f: hashlib.sha256((d / f).read_bytes()).hexdigest()[:16]
            for f in TOKENIZER_FILES if (d / f).is_file()}


def id_strings(tokenizer_json: dict[str, Any]) -> dict[int, str]:
    """Id → token string of a ``tokenizer.json`` (its model's vocab and its added tokens)."""
    out: dict[int, str] = {}
    vocab = (tokenizer_json.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        out.update({int(i): s for s, i in vocab.items()})
    elif isinstance(vocab, list):   # unigram: [[piece, score], ...], the index is the id
        out.update({i: v[0] for i, v in enumerate(vocab) if isinstance(v, list) and v})
    for tok in tokenizer_json.get("added_tokens") or []:
        out[int(tok["id"])] = tok["content"]
    return out


def draft_to_target(draft: dict[int, str], target: dict[int, str], size: int) -> list[int]:
    """For each draft id below ``size``, the target id of the same string (-1: none) (pure)."""
    by_string = {s: i for i, s in target.items()}
    return [by_string.get(draft[i], -1) if i in draft else -1 for i in range(size)]


def differing_ids(mapping: list[int]) -> int:
    """How many draft ids mean another target id (or none)."""
    return sum(1 for i, t in enumerate(mapping) if t != i)


def _read_tokenizer(d: Path) -> dict[int, str] | None:
    try:
        return id_strings(json.loads((d / "tokenizer.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_map(path: Path, mapping: list[int]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"draft_to_target": mapping}))
    return path


def engine_translates(ctx: Context) -> bool:
    """The served speculative config (the command's, or the one a running server's start-up
    log names) asks vLLM to map draft ids to target ids by token string."""
    return ctx.settings is not None and bool(ctx.settings.options.get("use_heterogeneous_vocab"))


def as_served_map(ctx: Context) -> Path | None:
    """The draft-to-target map the oracle needs to run the drafter as the engine does, when the
    drafter's tokenizer gives some ids other strings than the target's: the identity (the
    engine reads the drafter's ids as target ids) or, where the command turns on vLLM's own
    translation, the map by token string. None when nothing needs mapping."""
    if ctx.method != "draft_model" or ctx.draft_dir is None or ctx.target_dir is None:
        return None
    d, t = read_config(ctx.draft_dir), read_config(ctx.target_dir)
    size = d.get("vocab_size")
    if not isinstance(size, int) or size != t.get("vocab_size"):
        return None
    ds, ts = _read_tokenizer(ctx.draft_dir), _read_tokenizer(ctx.tokenizer_dir or ctx.target_dir)
    if ds is None or ts is None:
        return None
    mapping = draft_to_target(ds, ts, size)
    if differing_ids(mapping) == 0:
        return None
    served = mapping if engine_translates(ctx) else list(range(size))
    return _write_map(ctx.workdir / "vocab-as-served.json", served)


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


def ships_map(ctx: Context) -> bool:
    """Whether the served drafter has a vocabulary of its own: a ``draft_vocab_size`` other
    than the target's, or a ``d2t`` in its checkpoint (whatever the method)."""
    if ctx.draft_dir is None or ctx.target_dir is None:
        return False
    cfg, tcfg = read_config(ctx.draft_dir), read_config(ctx.target_dir)
    size = cfg.get("draft_vocab_size")
    if size is not None and size != tcfg.get("vocab_size"):
        return True
    return _read_map(ctx.draft_dir)[0] is not None


def _read_map(draft_dir: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    from safetensors import safe_open

    d2t = t2d = None
    for f in sorted(draft_dir.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            for name in fh.keys():
                short = name.rsplit(".", 1)[-1]   # "d2t" or a prefixed "model.d2t"
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
    value = torch.from_numpy(np.asarray(d2t, dtype=np.int64))
    files = sorted(out.glob("*.safetensors"))
    placed = False
    for f in files:
        t = load_file(str(f))
        names = [n for n in t if n == "d2t" or n.endswith(".d2t")]
        if names:
            for n in names:
                t[n] = value.to(t[n].dtype)
            save_file(t, str(f), metadata={"format": "pt"})
            placed = True
    if not placed and files:   # a checkpoint saved without its map: add one
        t = load_file(str(files[0]))
        t["d2t"] = value
        save_file(t, str(files[0]), metadata={"format": "pt"})
    return out


def _map_counterfactual(ctx: Context, d2t: np.ndarray, evidence: str, change: str,
                        nums: dict[str, Any]) -> tuple[Finding, dict[str, Any]]:
    """The oracle of a copy of the head with ``d2t`` (offsets) against the served one: confirmed
    if acceptance recovers (``rules.decide_counterfactual``); ``nums`` gets both figures."""
    from specdoctor.experiments.oracle_gap import copy_counterfactual

    assert ctx.draft_dir is not None
    ctx.progress(f"oracle counterfactual: {change}")
    f, before_p, after_p = copy_counterfactual(
        ctx, HID, map_copy(ctx.draft_dir, d2t, ctx.workdir), evidence, change, nums)
    return f, {"before": before_p, f"after {change}": after_p}


def no_remap(h: Any, form: Any) -> tuple[str, tuple[str, ...]] | None:
    """Why the vocabulary fingerprint finds no remap of the drafter's ids (the evidence's end,
    and what stays unchecked), or None where the held-out steps show a systematic one
    (``h``: ``oracle.slotmap``'s held-out test; ``form``: ``oracle.fingerprint.Shape``)."""
    if h.learned_better and form.systematic:
        return None
    if h.rules_out or not form.moved:
        return "the drafter's misses follow no map of its ids", ()
    if h.learned_better:
        return ("the learned map is better on the held-out steps, but the ids it moves follow "
                "no rule (no swap, cycle, offset run, or several ids sent to one): a weak "
                "drafter's habitual misses give such maps, a vocabulary remap moves ids by a "
                "rule", ("a remap of the drafter's ids with no rule among them (ids sent "
                         "elsewhere one way only), which the held-out steps cannot tell apart "
                         "from a weak drafter's misses",))
    return "not shown better", ("a remap of the drafter's ids smaller than the held-out steps "
                                "can show",)


def refusal_size(ctx: Context) -> Size | None:
    """What a drafter the engine refused would have had accepted: the greedy oracle of the
    served files, per draft, against the nothing the server drafted (None: no oracle here, the
    cause then stands unsized)."""
    from specdoctor.experiments.oracle_gap import expected_profile, oracle_unavailable, \
        served_oracle

    if ctx.settings is None or oracle_unavailable(ctx) is not None:
        return None
    try:
        ref = common.apd(expected_profile(served_oracle(ctx)))
    except SpecdoctorError:   # a drafter the oracle cannot read either (another vocab size)
        return None
    return Size(ref, how=f"the engine refused the drafter and drafted nothing; the oracle of "
                         f"the served files has {ref:.3f} accepted per draft")


def _llamacpp_refusal(ctx: Context, result: ExperimentResult) -> ExperimentResult:
    """A GGUF pair: llama.cpp's own compatibility rules on the two files' metadata
    (``gguf_files.llamacpp_compatible``). A pair it refuses is refused when the server starts,
    which then serves without speculation; where the server also drafted nothing, that refusal
    is the cause (basis comparison: the engine's own rule on the served files), and it accounts
    for every token the drafter would have had accepted (``refusal_size``), not for what a
    counterfactual on the drafter's ids recovers inside the oracle. Otherwise what the rules
    say joins the evidence."""
    from specdoctor import gguf_files

    why = gguf_files.llamacpp_compatible(gguf_files.metadata(ctx.gguf["target"]),
                                         gguf_files.metadata(ctx.gguf["draft"]))
    result.numbers["llamacpp_refuses"] = why
    if not why:
        return result
    said = (f"llama.cpp's own check of the two GGUF files refuses this drafter: "
            f"{'; '.join(why)}; the server then serves without speculation")
    g = ctx.measured.greedy
    drafted = g is not None and g.total is not None and bool(g.total.draft_tokens)
    findings = []
    for f in result.findings:
        if f.hypothesis != HID:
            findings.append(f)
        elif not drafted and ctx.engine == "llamacpp":
            findings.append(replace(f, verdict=Verdict.CONFIRMED, basis="comparison",
                                    size=refusal_size(ctx),
                                    evidence=f"{said}, and it drafted nothing; {f.evidence}"))
        else:
            findings.append(replace(f, evidence=f"{f.evidence}; {said}"))
    result.findings = findings
    return result


class VocabMapCheck:
    id = "vocab-map-check"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method == "ngram":
            return None
        if ctx.target_dir is None:
            return common.UNKNOWN_TARGET
        if ctx.method in HEAD_METHODS and ctx.method not in MAP_METHODS:
            return None
        if ctx.draft_dir is None:
            return common.UNKNOWN_DRAFT
        if ctx.method in ("draft_model", *MAP_METHODS):
            return None
        return f"no vocabulary check for method {ctx.method!r}"

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        if ctx.method == "ngram":
            return ExperimentResult(self.id, [Finding(HID, Verdict.EXCLUDED,
                                                      "prompt lookup proposes the target's own "
                                                      "tokens: no vocabulary to mismatch")])
        if ctx.method in MAP_METHODS or (ctx.method in HEAD_METHODS and ships_map(ctx)):
            return self._map(ctx)
        if ctx.method in HEAD_METHODS:
            return self._same_vocab(ctx)
        result = self._tokenizers(ctx)
        return _llamacpp_refusal(ctx, result) if {"target", "draft"} <= set(ctx.gguf) else result

    def _tokenizers(self, ctx: Context) -> ExperimentResult:
        assert ctx.draft_dir is not None and ctx.target_dir is not None
        t0 = time.perf_counter()
        d, t = read_config(ctx.draft_dir), read_config(ctx.target_dir)
        tok_dir = ctx.tokenizer_dir or ctx.target_dir
        dd, td = _digest(ctx.draft_dir), _digest(tok_dir)
        shared = sorted(set(dd) & set(td))
        differ = [f for f in shared if dd[f] != td[f]]
        nums: dict[str, Any] = {"draft_vocab": d.get("vocab_size"),
                                "target_vocab": t.get("vocab_size"),
                                "tokenizer_files_compared": shared, "differ": differ}
        if d.get("vocab_size") != t.get("vocab_size"):
            f = Finding(HID, Verdict.INCONCLUSIVE,
                        f"vocab_size draft {d.get('vocab_size')} vs target {t.get('vocab_size')}: "
                        f"the engine tokenizes with the target's; a lead, not a verdict")
            return ExperimentResult(self.id, [f], nums)
        if not differ:
            same = (f"same vocab size ({t.get('vocab_size')})"
                    + (f" and identical {', '.join(shared)}" if shared else
                       "; the drafter ships no tokenizer, the engine uses the target's"))
            f, curves = self._fingerprint(ctx, same, nums)
            return ExperimentResult(self.id, [f], nums, curves,
                                    wall_s=time.perf_counter() - t0)
        ds, ts = _read_tokenizer(ctx.draft_dir), _read_tokenizer(tok_dir)
        if ds is None or ts is None:
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.INCONCLUSIVE,
                f"tokenizer files differ ({', '.join(differ)}) with the same vocab size, and "
                f"no tokenizer.json on both sides to compare the ids of")], nums)
        mapping = draft_to_target(ds, ts, int(t["vocab_size"]))
        moved = differing_ids(mapping)
        nums["ids_meaning_another_token"] = moved
        if moved == 0:
            f, curves = self._fingerprint(
                ctx, f"tokenizer files differ ({', '.join(differ)}), yet every id means the "
                     f"same token string in both", nums)
            return ExperimentResult(self.id, [f], nums, curves,
                                    wall_s=time.perf_counter() - t0)
        if engine_translates(ctx):
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.EXCLUDED,
                f"{moved} draft ids mean other tokens than the same target ids, and the command "
                f"turns on use_heterogeneous_vocab: the engine translates them by token string")],
                nums)
        f, curves = self._translated(ctx, mapping, moved)
        return ExperimentResult(self.id, [f], nums, curves, wall_s=time.perf_counter() - t0)

    def _fingerprint(self, ctx: Context, files: str, nums: dict[str, Any]
                     ) -> tuple[Finding, dict[str, Any]]:
        """The files agree; do the drafter's weights? Where its first drafts and the target's
        tokens differ, a map learned from them on half the prompts is scored on the other half
        (``oracle.slotmap``, read off the greedy oracle's steps as the diagnosis computed them,
        never run again for this: ``oracle.fingerprint``).
        Systematic and better on the held-out prompts: the oracle with the drafter's ids
        remapped by the learned map decides (a counterfactual). Ruled out: excluded. Neither,
        or no oracle: the files' agreement stands, and what was not checked is said."""
        from specdoctor.experiments.oracle_gap import oracle_unavailable
        from specdoctor.oracle import fingerprint, slotmap

        why = oracle_unavailable(ctx) or (
            None if ctx.oracle_greedy is not None else "the greedy oracle did not run")
        if why is not None:
            return Finding(HID, Verdict.EXCLUDED, f"{files}: the drafter reads the engine's "
                           f"ids as the files say", unchecked=(
                               f"whether the drafter's weights agree with its files (its "
                               f"proposals need the oracle: {why})",)), {}
        ctx.progress("vocabulary fingerprint: the drafter's first drafts against the target's "
                     "tokens")
        pairs = fingerprint.pairs_from_traces(ctx.oracle_greedy.traces)
        vocab = int(read_config(ctx.draft_dir).get("vocab_size") or 0) if ctx.draft_dir else 0
        top = max([int(p.slots.max(initial=0)) for p in pairs]
                  + [int(p.nexts.max(initial=0)) for p in pairs] + [vocab - 1])
        served = np.arange(top + 1)
        h, learned = slotmap.held_out(pairs, served)
        form = fingerprint.shape(learned, served)
        nums["fingerprint"] = {"positions": h.positions, "served_hits": h.served,
                               "learned_hits": h.learned, "better": h.better,
                               "worse": h.worse, "p": h.p, "shape": form.text(),
                               "moved": {str(k): v for k, v in list(form.moved.items())[:64]}}
        held = (f"on {h.positions} held-out steps the first draft is the target's token "
                f"{h.served / max(h.positions, 1):.1%} of the time as served, "
                f"{h.learned / max(h.positions, 1):.1%} through a map learned from the other "
                f"prompts ({h.better} gained, {h.worse} lost, one-sided sign test "
                f"p = {h.p:.2g}); the learned map: {form.text()}")
        no = no_remap(h, form)
        if no is not None:
            why, unchecked = no
            return Finding(HID, Verdict.EXCLUDED, f"{files}; {held}: {why}",
                           unchecked=unchecked), {}
        if ctx.method != "draft_model":
            return Finding(HID, Verdict.INCONCLUSIVE, f"{files}; {held}: a systematic "
                           f"substitution; the oracle cannot remap a {ctx.method} drafter's ids "
                           f"to confirm it"), {}
        mapping, dropped = fingerprint.one_to_one(
            [int(x) for x in learned[: vocab or len(learned)]])
        moved = sum(1 for d, t in enumerate(mapping) if t >= 0 and t != d)
        if dropped:
            held += (f"; {len(dropped)} learned substitution(s) land on an id another draft id "
                     f"keeps (a map is one-to-one), so they are left unmapped")
        if not moved:
            return Finding(HID, Verdict.EXCLUDED, f"{files}; {held}: no substitution is left "
                           f"that a vocabulary map could make (what the drafter proposes in "
                           f"place of the target's token collides with ids it proposes "
                           f"rightly: a weak drafter's confusions, not a remap)"), {}
        f, curves = self._translated(ctx, mapping, moved,
                                     lead=f"{files}; {held}",
                                     change="the drafter with its ids remapped by the map learned "
                                            "from its proposals")
        if f.verdict is not Verdict.CONFIRMED:
            f = replace(f, verdict=Verdict.INCONCLUSIVE,
                        evidence=f.evidence + ": the held-out steps show a systematic remap, the "
                                 "oracle with it undone does not recover")
        else:
            f = replace(f, evidence=f.evidence + f"; the map found: {form.text()}")
        return f, curves

    def _same_vocab(self, ctx: Context) -> ExperimentResult:
        assert ctx.target_dir is not None
        t = read_config(ctx.target_dir)
        d = read_config(ctx.draft_dir) if ctx.draft_dir else t
        if d.get("vocab_size") != t.get("vocab_size"):
            f = Finding(HID, Verdict.INCONCLUSIVE,
                        f"{ctx.method} drafts in the target's vocabulary, but vocab_size is "
                        f"draft {d.get('vocab_size')} vs target {t.get('vocab_size')}")
        else:
            nums: dict[str, Any] = {"draft_vocab": d.get("vocab_size"),
                                    "target_vocab": t.get("vocab_size")}
            f, curves = self._fingerprint(ctx, f"{ctx.method} drafts in the target's own "
                                               f"vocabulary ({t.get('vocab_size')} ids)", nums)
            return ExperimentResult(self.id, [f], nums, curves)
        return ExperimentResult(self.id, [f], {"draft_vocab": d.get("vocab_size"),
                                               "target_vocab": t.get("vocab_size")})

    def _map(self, ctx: Context) -> ExperimentResult:
        from specdoctor.experiments.oracle_gap import oracle_unavailable

        t0 = time.perf_counter()
        assert ctx.draft_dir is not None and ctx.target_dir is not None
        cfg, tcfg = read_config(ctx.draft_dir), read_config(ctx.target_dir)
        vocab = int(tcfg.get("vocab_size") or cfg.get("vocab_size") or 0)
        d2t, t2d = _read_map(ctx.draft_dir)
        if d2t is None:
            if int(cfg.get("draft_vocab_size") or vocab) == vocab:
                return ExperimentResult(self.id, [Finding(
                    HID, Verdict.EXCLUDED, "no d2t: the head drafts in the target's vocabulary")])
            chk = MapCheck(None, f"draft_vocab_size {cfg.get('draft_vocab_size')} is smaller "
                                 f"than the target's {vocab} and the checkpoint has no d2t: "
                                 f"vLLM serves draft id i as target id i (zero offsets)")
        else:
            chk = check_map(d2t, t2d, vocab)
        nums: dict[str, Any] = {"draft_vocab": None if d2t is None else len(d2t),
                                "target_vocab": vocab, "has_d2t": d2t is not None,
                                "has_t2d": t2d is not None, "consistent": chk.consistent}
        if chk.consistent is False and chk.repaired is None:
            return ExperimentResult(self.id, [Finding(HID, Verdict.INCONCLUSIVE, chk.evidence)],
                                    nums)
        why = oracle_unavailable(ctx)
        if why is not None:
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.INCONCLUSIVE, f"{chk.evidence}; whether the map sends the head's "
                f"slots to the tokens it was trained for needs the oracle: {why}")], nums)
        if chk.consistent is False:
            f, curves = _map_counterfactual(ctx, chk.repaired, chk.evidence,
                                            "d2t rebuilt from t2d", nums)
        else:
            f, curves = self._proposals(ctx, chk, nums)
        return ExperimentResult(self.id, [f], nums, curves, wall_s=time.perf_counter() - t0)

    def _proposals(self, ctx: Context, chk: MapCheck, nums: dict[str, Any]
                   ) -> tuple[Finding, dict[str, Any]]:
        """Does the served map send the head's proposals to the tokens it was trained for?
        A map learned from the head's first drafts on half the prompts, scored on the other
        half (``oracle.slotmap``); where it does better, the oracle counterfactual with the
        map learned from every prompt measures what it recovers."""
        from specdoctor.experiments.oracle_gap import oracle_config
        from specdoctor.oracle import fingerprint, slotmap
        from specdoctor.oracle.heads.proposals import first_slot_pairs

        ctx.progress("vocabulary map: the head's proposals against the tokens d2t names")
        served, pairs = first_slot_pairs(oracle_config(ctx, 0.0, 1.0))
        if served is None:
            return Finding(HID, Verdict.EXCLUDED, "the head drafts in the target's vocabulary "
                                                  "(no map to get wrong)"), {}
        h, learned = slotmap.held_out(pairs, served)
        form = fingerprint.shape(learned, served)
        nums["proposals"] = {"positions": h.positions, "served_hits": h.served,
                             "learned_hits": h.learned, "better": h.better, "worse": h.worse,
                             "slots_changed": h.slots_changed, "p": h.p, "shape": form.text()}
        ev = f"{chk.evidence}; {h.text()}" + (f"; the learned map: {form.text()}"
                                               if form.moved else "")
        if not h.learned_better and h.rules_out:
            return Finding(HID, Verdict.EXCLUDED, f"{ev}: the head's proposals land where d2t "
                                                  f"sends them (a gain of "
                                                  f"{slotmap.MARGIN:.0%} is ruled out)"), {}
        if not h.learned_better:
            return Finding(HID, Verdict.INCONCLUSIVE,
                           f"{ev}: neither shown better (p < {slotmap.ALPHA}) nor ruled out "
                           f"(a gain of {slotmap.MARGIN:.0%}); more prompts decide"), {}
        f, curves = _map_counterfactual(ctx, learned - np.arange(len(learned)), ev,
                                        "d2t learned from the head's proposals", nums)
        if f.verdict is Verdict.CONFIRMED:
            f = replace(f, evidence=f.evidence + "; fix: serve the head with the d2t/t2d it was "
                        "trained with (a map regenerated from other data, or none, sends its "
                        "slots to other tokens)")
        else:
            f = replace(f, verdict=Verdict.INCONCLUSIVE,
                        evidence=f.evidence + ": the held-out positions say the map is wrong, "
                        "the oracle does not recover")
        return f, curves

    def _translated(self, ctx: Context, mapping: list[int], moved: int, lead: str = "",
                    change: str = "the drafter with its ids translated by token string"
                    ) -> tuple[Finding, dict[str, Any]]:
        """The oracle counterfactual: the drafter's ids translated by ``mapping`` (draft id →
        target id; by token string unless ``change`` says otherwise)."""
        from specdoctor.experiments.oracle_gap import (
            expected_profile,
            oracle_unavailable,
            run_oracle,
        )

        lead = lead or (f"{moved} of {len(mapping)} draft ids mean another token than the "
                        f"same target id")
        why = oracle_unavailable(ctx)
        if why is not None:
            return Finding(HID, Verdict.INCONCLUSIVE, f"{lead}; the counterfactual needs the "
                           f"oracle: {why}"), {}
        served = ctx.oracle_greedy
        before_p = expected_profile(served) if served is not None else (
            ctx.measured.greedy.total if ctx.measured.greedy is not None else None)
        if before_p is None:
            return Finding(HID, Verdict.INCONCLUSIVE, f"{lead}; nothing measured to compare "
                           f"the translated drafter with"), {}
        ctx.progress("vocabulary counterfactual: the drafter's ids translated to the target's")
        path = _write_map(ctx.workdir / "vocab-translated.json", mapping)
        after_p = expected_profile(run_oracle(ctx, 0.0, 1.0, vocab_map=path))
        before, after = common.apd(before_p), common.apd(after_p)
        ceiling = common.ceiling(ctx)
        f = rules.decide_counterfactual(
            HID, f"{lead}; {change} (oracle)", before, after, ceiling,
            significant=rules.oracle_change_is_real(before, after, ceiling))
        if f.verdict is Verdict.CONFIRMED and "token string" in change:
            f = replace(f, evidence=f.evidence + "; fix: a drafter with the target's tokenizer, "
                        "or let the engine translate (vLLM: \"use_heterogeneous_vocab\": true in "
                        "--speculative-config)")
        return f, {"before": before_p, "after ids translated": after_p}
