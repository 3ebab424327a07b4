"""Clinic cases on llama.cpp's server: upstream llama.cpp speculative-decoding bugs, reproduced
on the llama.cpp lab, and its healthy case.

Every case serves the lab's trained target as f32 GGUF with the lab's small trained drafter as
q8_0 GGUF (``lab.llamacpp``), copied under neutral names (``m1/model.gguf``, ``m2/model.gguf``)
into the case's folder, on ``llama-server`` with the lab's flags (``lab.llamacpp.plan``). A
fault is the launch flags that trigger it or an edit of the drafter's files before its GGUF is
written; nothing in a path, a file's metadata or the command names it. All were committed with
their keys before the first diagnosis of any of them.

Two of them key ``speculation-off``: a launch that names a drafter but never drafts. No
catalogue hypothesis has that id when they are committed, so their first answers cannot name
it; the key is the mechanism, not what the code could say.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from families import permute_vocab_block
from specdoctor.lab.edits import add_noise
import patients
from patients import Case, Setup, publish

K = 4


def _flags(argv: list[str], drop: tuple[str, ...] = (), put: dict[str, str] | None = None
           ) -> list[str]:
    """``argv`` without the flags in ``drop`` (each with its value), with ``put``'s flags set."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in drop:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    for flag, value in (put or {}).items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def llama(edit_draft: Callable[[Path], None] | None = None, drop: tuple[str, ...] = (),
          put: dict[str, str] | None = None) -> Callable[[Path], Setup]:
    """The llama.cpp lab's healthy pair served by llama-server, with an edit of the drafter's
    files (before its GGUF is written) and/or flags dropped or set."""
    def build(tmp: Path) -> Setup:
        from specdoctor.lab import gguf_export, llamacpp, pairs

        budget = patients.DRAFTER_BUDGET[0]
        plan = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, target="trained", draft="small",
                                                      budget=budget, draft_type="q8_0"))
        draft = plan.draft
        if edit_draft is not None:
            _, source = pairs.model_dirs("trained", "small", budget)
            d = publish(source, tmp / "src")
            edit_draft(d)
            draft = gguf_export.exported(d, "q8_0")
            shutil.rmtree(tmp / "src")
        served = {}
        for role, src in (("m1", plan.target), ("m2", draft)):
            (tmp / role).mkdir()
            served[role] = shutil.copyfile(src, tmp / role / "model.gguf")
        argv = _flags(list(plan.spec.argv[1:]), drop, put)
        argv[argv.index("-m") + 1] = str(served["m1"])
        argv[argv.index("-md") + 1] = str(served["m2"])
        argv[argv.index("--alias") + 1] = "m1"
        return Setup(argv, {}, ["greedy"], program=(str(llamacpp.server_binary()),))
    return build


LLAMACPP_CASES = [
    Case("llamacpp-healthy", None, llama(),
         "llama-server: the lab's trained target (f32 GGUF) drafted by its small trained "
         "drafter (q8_0 GGUF), k=4, every draft k long (--spec-draft-n-min 0, p-min 0)",
         category="healthy", part="none"),
    Case("up-llamacpp-spec-type-none", "speculation-off", llama(drop=("--spec-type",)),
         "llama-server given the drafter (-md) without --spec-type: it loads the drafter and "
         "never drafts",
         origin="upstream", twin="llamacpp-healthy", part="drafting",
         cite="ggml-org/llama.cpp issue #25345",
         upstream="llama-server's --spec-type defaults to none; -md alone loads the draft model, "
                  "builds no speculative implementation and logs that only at trace level, so "
                  "the server serves without speculation and says nothing (closed as a usage "
                  "error; the reporter asked for a warning)",
         how="the lab's launch without --spec-type draft-simple (the drafter still given)"),
    Case("up-llamacpp-n-min-over-max", "speculation-off",
         llama(put={"--spec-draft-n-min": "8"}),
         "llama-server with --spec-draft-n-min 8 above --spec-draft-n-max 4: every draft is "
         "shorter than the minimum and discarded",
         origin="upstream", twin="llamacpp-healthy", part="drafting",
         cite="ggml-org/llama.cpp issue #14048, PR #14104",
         upstream="the draft-model path discards a draft shorter than n_min ('ignoring small "
                  "draft'); nothing clamps n_min to n_max (an older server did), so n_min above "
                  "n_max discards every draft: nothing is drafted and no line says why",
         how="the lab's launch with --spec-draft-n-min 8 (n-max stays 4)"),
    Case("up-llamacpp-draft-vocab-refused", "tokenizer-mismatch", llama(permute_vocab_block),
         "llama-server with a drafter whose vocabulary is re-indexed on one block of 256 ids "
         "(its tokenizer and embedding/lm_head rows alike, before its GGUF is written)",
         origin="upstream", twin="llamacpp-healthy", part="drafter files",
         cite="ggml-org/llama.cpp PR #3812, PR #22358",
         upstream="llama.cpp compares the drafter's vocabulary with the target's when the "
                  "server starts (token texts from id 5 up, sizes, BOS/EOS); a drafter that "
                  "fails is refused with one error line and the server goes on serving without "
                  "speculation: the acceptance of a drafter of another vocabulary is nothing",
         how="the lab's small drafter re-indexed on its non-special ids 256 to 511 (a seeded "
             "permutation in tokenizer.json and the embedding and lm_head rows), written as "
             "q8_0 GGUF; in its own ids it is the drafter it was"),
    Case("up-llamacpp-draft-kv-q4", "engine-drafting",
         llama(put={"--spec-draft-type-k": "q4_0", "--spec-draft-type-v": "q4_0"}),
         "llama-server with the drafter's KV cache quantized to q4_0 (keys and values)",
         origin="upstream", twin="llamacpp-healthy", part="drafting", bites_here=True,
         cite="ggml-org/llama.cpp PR #10586",
         upstream="the server gave the draft model the target's quantized KV-cache type; the "
                  "drafter attends over a cache rounded to 4 bits and drafts worse than its "
                  "weights do (fixed by a separate draft cache type, F16 by default)",
         how="the lab's launch with --spec-draft-type-k q4_0 --spec-draft-type-v q4_0"),
    # -- committed with their keys before their first diagnosis, after the two speculation-off
    # cases' second try named it: another setting that discards every draft, and the lab's
    # damaged drafter on this engine (measured by hand when the fault was written, never
    # diagnosed)
    Case("up-llamacpp-p-min-one", "speculation-off",
         llama(put={"--spec-draft-p-min": "1.0"}),
         "llama-server with --spec-draft-p-min 1.0: drafting stops at the first token whose "
         "probability under the drafter is below 1",
         origin="upstream", twin="llamacpp-healthy", part="drafting",
         cite="ggml-org/llama.cpp issue #14048 (a draft setting that discards every draft), "
              "another setting",
         upstream="sibling of up-llamacpp-n-min-over-max: the draft-model path stops drafting "
                  "where the drafter's top probability falls below p_min; at 1.0 no draft "
                  "survives and no line says why",
         how="the lab's launch with --spec-draft-p-min 1.0"),
    Case("llamacpp-draft-noise", "draft-quality", llama(add_noise),
         "llama-server with a drafter whose every matrix carries Gaussian noise of half its "
         "own scale (before its GGUF is written)",
         twin="llamacpp-healthy", part="drafter files",
         how="lab.edits.add_noise on the lab's small drafter, written as q8_0 GGUF"),
    # added with the oracle's simulation of llama.cpp's drafting policy, not before it: a
    # healthy setting the oracle must read as the server drafts, never a first try
    Case("llamacpp-healthy-p-min", None, llama(put={"--spec-draft-p-min": "0.75"}),
         "llama-server: the healthy pair with --spec-draft-p-min 0.75, so drafts stop where "
         "the drafter is unsure (the setting older servers had by default)",
         category="healthy"),   # no part: not scored among the first tries
]

# Siblings committed with their keys before their first diagnosis: the refused vocabulary at a
# smaller size and in its special tokens, and the damaged drafter at another size (a fourth,
# another setting that drafts nothing, is in LLAMACPP_DROPPED)
LLAMACPP_CASES += [
    Case("up-llamacpp-draft-vocab-block-64", "tokenizer-mismatch",
         llama(lambda d: permute_vocab_block(d, lo=640, hi=704, seed=5)),
         "llama-server with a drafter whose vocabulary is re-indexed on the 64 ids 640 to 703 "
         "(its tokenizer and embedding/lm_head rows alike, before its GGUF is written)",
         origin="upstream", twin="llamacpp-healthy", part="drafter files",
         cite="ggml-org/llama.cpp PR #3812, PR #22358, at a smaller size",
         upstream="sibling at another size (64 ids) of up-llamacpp-draft-vocab-refused",
         how="the lab's small drafter re-indexed on its non-special ids 640 to 703 (seed 5), "
             "written as q8_0 GGUF"),
    Case("up-llamacpp-draft-eos-differs", "tokenizer-mismatch",
         llama(patients.set_field("eos_token_id", 2)),
         "llama-server with a drafter whose end-of-sequence token is another special token of "
         "the same vocabulary (before its GGUF is written)",
         origin="upstream", twin="llamacpp-healthy", part="drafter files",
         cite="ggml-org/llama.cpp PR #3812 (the special tokens compared), another direction",
         upstream="sibling of up-llamacpp-draft-vocab-refused in the special tokens: every "
                  "token text the same, the drafter's EOS id not the target's",
         how="the lab's small drafter with config eos_token_id 2 (the tokenizer's pad; the "
             "target's is 1), written as q8_0 GGUF"),
    Case("llamacpp-draft-noise-quarter", "draft-quality",
         llama(lambda d: add_noise(d, share=0.25, seed=11)),
         "llama-server with a drafter whose every matrix carries Gaussian noise of a quarter of "
         "its own scale (before its GGUF is written)",
         twin="llamacpp-healthy", part="drafter files", bites_here=True,
         upstream="sibling at a smaller size of llamacpp-draft-noise (half its scale)",
         how="lab.edits.add_noise(share=0.25, seed=11) on the lab's small drafter, written as "
             "q8_0 GGUF"),
]


def _two_blocks(d: Path) -> None:
    permute_vocab_block(d, lo=300, hi=308, seed=3)
    permute_vocab_block(d, lo=760, hi=768, seed=4)


# Siblings committed with their keys before their first diagnosis: a drafter llama.cpp refuses
# for its token text, at a smaller size and spread over two places of the vocabulary
LLAMACPP_CASES += [
    Case("up-llamacpp-draft-vocab-block-16", "tokenizer-mismatch",
         llama(lambda d: permute_vocab_block(d, lo=900, hi=916, seed=9)),
         "llama-server with a drafter whose vocabulary is re-indexed on the 16 ids 900 to 915 "
         "(its tokenizer and embedding/lm_head rows alike, before its GGUF is written)",
         origin="upstream", twin="llamacpp-healthy", part="drafter files",
         cite="ggml-org/llama.cpp PR #3812, PR #22358, at a smaller size",
         upstream="sibling at another size (16 ids) of up-llamacpp-draft-vocab-refused",
         how="the lab's small drafter re-indexed on its non-special ids 900 to 915 (seed 9), "
             "written as q8_0 GGUF"),
    Case("up-llamacpp-draft-vocab-two-blocks-8", "tokenizer-mismatch",
         llama(_two_blocks),
         "llama-server with a drafter whose vocabulary is re-indexed on two blocks of 8 ids "
         "(its tokenizer and embedding/lm_head rows alike, before its GGUF is written)",
         origin="upstream", twin="llamacpp-healthy", part="drafter files",
         cite="ggml-org/llama.cpp PR #3812, PR #22358, spread over the vocabulary",
         upstream="sibling of up-llamacpp-draft-vocab-refused in two places: ids 300 to 307 "
                  "and 760 to 767",
         how="the lab's small drafter re-indexed on its ids 300 to 307 (seed 3) and 760 to 767 "
             "(seed 4), written as q8_0 GGUF"),
]


# A sibling dropped after its first diagnosis because it does not reproduce its key (its rows
# stay in clinic.json and clinic_measured.json): keyed speculation-off, "a draft length of zero,
# so the loaded drafter never drafts", committed 4ac720d, first answer no cause at 39d920c.
LLAMACPP_DROPPED = {
    "up-llamacpp-n-max-zero": (
        "llama-server with --spec-draft-n-max 0 beside its drafter does draft: one token per "
        "step (measure.py: 626 drafts and 626 draft tokens on 16 prompts, 0.582 accepted per "
        "draft against the twin's 1.230 at n-max 4), so speculation is not off and the case "
        "is not a sibling of ggml-org/llama.cpp issue #14048 (every draft discarded); its loss "
        "is the draft length the launch set"),
}


# Siblings committed with their keys before their first diagnosis: the damaged drafter on
# llama-server at another size, and damaged in its head alone
LLAMACPP_CASES += [
    Case("llamacpp-draft-noise-3eighths", "draft-quality",
         llama(lambda d: add_noise(d, share=0.375, seed=13)),
         "llama-server with a drafter whose every matrix carries Gaussian noise of three eighths "
         "of its own scale (before its GGUF is written)",
         twin="llamacpp-healthy", part="drafter files", bites_here=True,
         upstream="sibling at another size of llamacpp-draft-noise (half its scale)",
         how="lab.edits.add_noise(share=0.375, seed=13) on the lab's small drafter, written as "
             "q8_0 GGUF"),
    Case("llamacpp-draft-head-noise", "draft-quality",
         llama(lambda d: add_noise(d, share=1.0, seed=17, only=("lm_head.weight",))),
         "llama-server with a drafter whose output head carries Gaussian noise of its own scale "
         "(before its GGUF is written)",
         twin="llamacpp-healthy", part="drafter files", bites_here=True,
         upstream="sibling of llamacpp-draft-noise in another place: the head alone",
         how="lab.edits.add_noise(share=1.0, seed=17, only lm_head.weight) on the lab's small "
             "drafter, written as q8_0 GGUF"),
]
