"""Do the drafter's token ids mean the target's tokens?

For an independent draft model (vLLM ``draft_model``) the engine tokenizes once with the
target's tokenizer, so the drafter's vocabulary must be the target's: compare vocab sizes and
the tokenizer files' content. Prompt lookup copies target tokens (nothing to map). Drafters with
a draft-to-target map (EAGLE3 ``d2t``) need the map counterfactual through their oracle, which
this build does not have: reported unavailable.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from specdoctor.diagnose.experiments import common
from specdoctor.experiments.base import Context, ExperimentResult, Finding, Verdict

HID = "tokenizer-mismatch"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model")


def _digest(d: Path) -> dict[str, str]:
    return {f: hashlib.sha256((d / f).read_bytes()).hexdigest()[:16]
            for f in TOKENIZER_FILES if (d / f).is_file()}


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
