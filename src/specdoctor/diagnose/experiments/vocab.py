"""Do the drafter's token ids mean the target's tokens?

For an independent draft model (vLLM ``draft_model``) the engine tokenizes once with the
target's tokenizer and hands the drafter those ids as they are, so the drafter's vocabulary must
be the target's id for id. Compared: vocab sizes, then the token string behind every id of the
two ``tokenizer.json`` files. Where the strings differ, the counterfactual runs through the
oracle: the same drafter with its ids translated to the target's (by token string) against the
drafter as the engine runs it. Recovery confirms ``tokenizer-mismatch``; none excludes it.

vLLM can translate itself (``use_heterogeneous_vocab`` in ``--speculative-config``: ids mapped by
token string); where the command turns that on, the oracle translates the same way and there is
nothing to suspect.

Prompt lookup copies target tokens (nothing to map). Drafters with a draft-to-target map (EAGLE3
``d2t``) need the map counterfactual through their oracle, which this build does not have:
reported unavailable.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from specdoctor.diagnose import rules
from specdoctor.diagnose.experiments import common
from specdoctor.experiments.base import Context, ExperimentResult, Finding, Verdict

HID = "tokenizer-mismatch"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model")


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
    """The command asks vLLM to map draft ids to target ids by token string."""
    sc = ctx.launch.speculative_config() if ctx.launch is not None else None
    return bool((sc or {}).get("use_heterogeneous_vocab"))


def as_served_map(ctx: Context) -> Path | None:
    """The draft-to-target map the oracle needs to run the drafter as the engine does, when the
    drafter's tokenizer gives some ids other strings than the target's: the identity (the
    engine reads the drafter's ids as target ids) or, where the command turns on vLLM's own
    translation, the map by token string. None when nothing needs mapping."""
    if ctx.method != "draft_model" or ctx.draft_dir is None or ctx.target_dir is None:
        return None
    d, t = common.read_config(ctx.draft_dir), common.read_config(ctx.target_dir)
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


class VocabMapCheck:
    id = "vocab-map-check"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method == "ngram":
            return None
        if ctx.method != "draft_model":
            return (f"{ctx.method} maps draft ids through its own vocabulary map: its check "
                    f"runs through the {ctx.method} oracle, not in this build")
        if ctx.draft_dir is None or ctx.target_dir is None:
            return "model directories unknown"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        if ctx.method == "ngram":
            return ExperimentResult(self.id, [Finding(HID, Verdict.EXCLUDED,
                                                      "prompt lookup proposes the target's own "
                                                      "tokens: no vocabulary to mismatch")])
        assert ctx.draft_dir is not None and ctx.target_dir is not None
        t0 = time.perf_counter()
        d, t = common.read_config(ctx.draft_dir), common.read_config(ctx.target_dir)
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
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.EXCLUDED, f"same vocab size ({t.get('vocab_size')})"
                + (f" and identical {', '.join(shared)}" if shared else
                   "; the drafter ships no tokenizer, the engine uses the target's"))], nums)
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
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.EXCLUDED,
                f"tokenizer files differ ({', '.join(differ)}), yet every id means the same "
                f"token string in both: the drafter reads the engine's ids right")], nums)
        if engine_translates(ctx):
            return ExperimentResult(self.id, [Finding(
                HID, Verdict.EXCLUDED,
                f"{moved} draft ids mean other tokens than the same target ids, and the command "
                f"turns on use_heterogeneous_vocab: the engine translates them by token string")],
                nums)
        f, curves = self._translated(ctx, mapping, moved)
        return ExperimentResult(self.id, [f], nums, curves, wall_s=time.perf_counter() - t0)

    def _translated(self, ctx: Context, mapping: list[int], moved: int
                    ) -> tuple[Finding, dict[str, Any]]:
        """The oracle counterfactual: the drafter's ids translated by token string."""
        from specdoctor.diagnose.experiments.oracle import (
            expected_profile,
            oracle_unavailable,
            run_oracle,
        )

        lead = (f"{moved} of {len(mapping)} draft ids mean another token than the same target "
                f"id")
        why = oracle_unavailable(ctx)
        if why is not None:
            return Finding(HID, Verdict.INCONCLUSIVE, f"{lead}; the counterfactual needs the "
                           f"oracle: {why}"), {}
        served = ctx.data.get("oracle_greedy")
        before_p = expected_profile(served) if served is not None else (
            ctx.measured["greedy"].total if "greedy" in ctx.measured else None)
        if before_p is None:
            return Finding(HID, Verdict.INCONCLUSIVE, f"{lead}; nothing measured to compare "
                           f"the translated drafter with"), {}
        ctx.progress("vocabulary counterfactual: the drafter's ids translated to the target's")
        path = _write_map(ctx.workdir / "vocab-translated.json", mapping)
        after_p = expected_profile(run_oracle(ctx, 0.0, 1.0, vocab_map=path))
        before, after = common.apd(before_p), common.apd(after_p)
        f = rules.decide_counterfactual(
            HID, f"{lead}; the drafter with its ids translated by token string (oracle)",
            before, after, float(ctx.k or 1),
            significant=after - before > 0.05 * max(before, 0.1))
        if f.verdict is Verdict.CONFIRMED:
            f = replace(f, evidence=f.evidence + "; fix: a drafter with the target's tokenizer, "
                        "or let the engine translate (vLLM: \"use_heterogeneous_vocab\": true in "
                        "--speculative-config)")
        return f, {"before": before_p, "after ids translated": after_p}
