"""EAGLE3 drafters for the lab's Llama target: a trained head, and hand-wired controls.

vLLM's EAGLE3 head (``LlamaForCausalLMEagle3``, vllm/model_executor/models/llama_eagle3.py) is
one decoder layer whose attention reads ``[norm(embed(token)), norm(hidden)]``. Its first pass
takes ``fc(concat of the target's aux hidden states)`` as ``hidden`` (aux ids 0..L: 0 = the
embeddings, i = the output of layer i-1), paired with the *next* token (entry at position i
holds token i+1); each later step feeds back its own pre-norm output with the token it just
drafted, one position further. Logits come from its own ``lm_head`` over a smaller draft
vocabulary, mapped to target ids by ``d2t`` (target id = draft id + d2t[draft id]).

Training is training-time test (EAGLE-3): the head is unrolled for ``k`` steps over the
target's greedy text, every step attending to the first-pass entries of earlier positions and
to its own earlier steps (``nn.ttt_mask``), with the greedy token as input (greedy acceptance
only ever counts drafts whose predecessors were right).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.lab.drafters import cache, cycle, nn, targets
from specdoctor.lab.drafters.fit import FitRecipe, fit

if TYPE_CHECKING:
    import torch

ARCH = "LlamaForCausalLMEagle3"


@dataclass(frozen=True)
class Shape(nn.LayerShape):
    vocab: int = 1024
    draft_vocab: int = 512
    aux_ids: tuple[int, ...] = (0, 1, 2)
    norm_before_residual: bool = False
    norm_output: bool = False  # EAGLE-3.1: the next step is fed the final-normed output


@dataclass(frozen=True)
class Recipe:
    shape: Shape = Shape()
    data: targets.DataRecipe = targets.DataRecipe()
    fit: FitRecipe = FitRecipe(steps=400, batch=16)
    steps: int = 3  # training-time-test unroll = the k it is trained for
    init_seed: int = 0


RECIPES = {
    "full": Recipe(),
    "ci": Recipe(data=targets.DataRecipe(sequences=64), fit=FitRecipe(steps=40, batch=8,
                                                                       warmup=10)),
}


def config(s: Shape, target_layers: int = 2) -> dict[str, Any]:
    ids = list(s.aux_ids)
    return {
        "architectures": [ARCH], "model_type": "llama",
        "hidden_size": s.hidden, "intermediate_size": s.intermediate, "num_hidden_layers": 1,
        "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads,
        "head_dim": s.head_dim, "rms_norm_eps": nn.EPS, "hidden_act": "silu",
        "rope_parameters": {"rope_type": "default", "rope_theta": s.rope_theta},
        "max_position_embeddings": 2048, "vocab_size": s.vocab,
        "draft_vocab_size": s.draft_vocab, "target_hidden_size": s.hidden,
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
        "norm_before_residual": s.norm_before_residual,
        # explicit, in both places vLLM reads: for a 2-layer target the defaults (2, L//2, L-3)
        # are wrong and fc would receive 2 of the 3 states it expects
        "eagle_aux_hidden_state_layer_ids": ids,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids, "use_aux_hidden_state": True},
        "dtype": "float32",
        **({"norm_output": True} if s.norm_output else {}),
    }


def init(s: Shape, seed: int) -> dict[str, torch.Tensor]:
    import torch

    g = torch.Generator().manual_seed(seed)
    q, kv, h = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.hidden

    def rnd(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.02).requires_grad_()

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n).requires_grad_()

    return {
        "midlayer.self_attn.q_proj.weight": rnd(q, 2 * h),
        "midlayer.self_attn.k_proj.weight": rnd(kv, 2 * h),
        "midlayer.self_attn.v_proj.weight": rnd(kv, 2 * h),
        "midlayer.self_attn.o_proj.weight": rnd(h, q),
        "midlayer.mlp.gate_proj.weight": rnd(s.intermediate, h),
        "midlayer.mlp.up_proj.weight": rnd(s.intermediate, h),
        "midlayer.mlp.down_proj.weight": rnd(h, s.intermediate),
        "midlayer.input_layernorm.weight": ones(h),
        "midlayer.hidden_norm.weight": ones(h),
        "midlayer.post_attention_layernorm.weight": ones(h),
        "norm.weight": ones(h),
        "fc.weight": rnd(h, len(s.aux_ids) * h),
        "lm_head.weight": rnd(s.draft_vocab, h),
    }


def forward(p: dict[str, torch.Tensor], s: Shape, embed: torch.Tensor, aux: torch.Tensor,
            ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Draft logits (draft vocabulary) of every step for every start, [B, T, Vd] each.

    ``aux`` [B, T, n_aux*H]: the target's aux states at each position; ``ids`` [B, T]. Entry i
    of step j holds token i+1+j at position i+j and predicts token i+2+j."""
    import torch

    b, t = ids.shape
    pad = torch.zeros(b, steps, dtype=ids.dtype)
    ids_ext = torch.cat([ids, pad], 1)
    hidden = aux @ p["fc.weight"].T
    keys: list[torch.Tensor] = []
    vals: list[torch.Tensor] = []
    out = []
    base = torch.arange(t)
    for j in range(steps):
        e = embed[ids_ext[:, 1 + j:1 + j + t]]
        hn = nn.rms_norm(hidden, p["midlayer.hidden_norm.weight"])
        x = torch.cat([nn.rms_norm(e, p["midlayer.input_layernorm.weight"]), hn], -1)
        residual = hn if s.norm_before_residual else hidden
        pos = base + j
        q = nn.rope(nn.heads(x @ p["midlayer.self_attn.q_proj.weight"].T, s.heads), pos,
                    s.rope_theta)
        k = nn.rope(nn.heads(x @ p["midlayer.self_attn.k_proj.weight"].T, s.kv_heads), pos,
                    s.rope_theta)
        v = nn.heads(x @ p["midlayer.self_attn.v_proj.weight"].T, s.kv_heads)
        keys.append(k)
        vals.append(v)
        a = nn.attend(q, torch.cat(keys, 1), torch.cat(vals, 1), nn.ttt_mask(t, j))
        r = a @ p["midlayer.self_attn.o_proj.weight"].T + residual
        m = nn.swiglu(nn.rms_norm(r, p["midlayer.post_attention_layernorm.weight"]),
                      p["midlayer.mlp.gate_proj.weight"], p["midlayer.mlp.up_proj.weight"],
                      p["midlayer.mlp.down_proj.weight"])
        pre = m + r
        normed = nn.rms_norm(pre, p["norm.weight"])
        out.append(normed @ p["lm_head.weight"].T)
        hidden = normed if s.norm_output else pre
    return out


def draft_ids(d2t: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.arange(len(d2t)) + d2t


# -- trained ----------------------------------------------------------------------------------

def vocabulary(greedy: torch.Tensor, size: int, vocab: int) -> torch.Tensor:
    """The ``size`` most frequent greedy labels (ties by id), sorted; the last id is left out
    so that a d2t shifted by one still lands inside the target vocabulary."""
    import torch

    counts = torch.bincount(greedy.flatten(), minlength=vocab).to(torch.float64)
    counts[vocab - 1] = -1
    order = sorted(range(vocab), key=lambda i: (-counts[i].item(), i))
    return torch.tensor(sorted(order[:size]), dtype=torch.long)


def trained(budget: str = "full", norm_output: bool = False) -> Path:
    """The trained EAGLE3 drafter for ``targets.llama(budget)`` (built once); with
    ``norm_output``, trained as EAGLE-3.1 heads are: each step after the first is fed the
    previous step's final-normed output (written to its config as norm_output)."""
    r = RECIPES[budget]
    if norm_output:
        r = replace(r, shape=replace(r.shape, norm_output=True))
    target = targets.llama(budget)
    recipe = {"method": "eagle3", **_key(r), "target": target.name}

    def build(out: Path) -> dict[str, Any]:
        return _train_into(out, target, r)

    return cache.built("eagle3-trained", recipe, [target / "model.safetensors"], build)


def _key(r: Recipe) -> dict[str, Any]:
    # an option left off keeps the key of the heads trained before it existed
    shape = {k: v for k, v in asdict(r.shape).items() if k != "norm_output" or v}
    return {"shape": shape, "data": asdict(r.data), "fit": r.fit.key(),
            "steps": r.steps, "init_seed": r.init_seed}


def _train_into(out: Path, target: Path, r: Recipe) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    t0 = time.perf_counter()
    inputs = targets.training_inputs(target, r.data, threads=r.fit.threads)
    data, embed, head = inputs.data, inputs.embed, inputs.head
    s = r.shape
    vocab_ids = vocabulary(data.greedy[:, data.prompt_len - 1:], s.draft_vocab, s.vocab)
    to_draft = torch.full((s.vocab,), -100, dtype=torch.long)
    to_draft[vocab_ids] = torch.arange(s.draft_vocab)
    p = init(s, r.init_seed)
    with torch.no_grad():
        p["lm_head.weight"].copy_(head[vocab_ids])
    aux = torch.cat([data.aux[i] for i in s.aux_ids], -1)
    t = data.ids.shape[1]

    def loss_fn(rows: torch.Tensor) -> torch.Tensor:
        logits = forward(p, s, embed, aux[rows], data.ids[rows], r.steps)
        total = torch.zeros(())
        for j, lg in enumerate(logits):
            labels = to_draft[data.greedy[rows, 1 + j:]]
            total = total + F.cross_entropy(lg[:, :t - 1 - j].flatten(0, 1), labels.flatten(),
                                            ignore_index=-100)
        return total / len(logits)

    rep = fit(p, loss_fn, data.ids.shape[0], r.fit, name="eagle3")
    d2t = vocab_ids - torch.arange(s.draft_vocab)
    write(out, p, s, d2t)
    coverage = float(torch.isin(data.greedy[:, data.prompt_len:], vocab_ids).float().mean())
    return {**rep, "draft_vocab_coverage": round(coverage, 4),
            "seconds": round(time.perf_counter() - t0, 1)}


def write(out: Path, p: dict[str, torch.Tensor], s: Shape, d2t: torch.Tensor) -> None:
    import torch

    t2d = torch.zeros(s.vocab, dtype=torch.bool)
    t2d[draft_ids(d2t).clamp(max=s.vocab - 1)] = True
    cache.write_config(out, config(s))
    cache.save_tensors(out, {**{k: v.detach() for k, v in p.items()},
                             "d2t": d2t.to(torch.int64), "t2d": t2d})


# -- controls (on the cycle target) --------------------------------------------------------------

# Draft vocabulary of the controls: a window of target ids holding the cycle, so d2t is a
# constant offset and the map is exercised.
CONTROL_VOCAB_START = 256


def control_tensors(name: str) -> tuple[dict[str, torch.Tensor], Shape, torch.Tensor]:
    """Hand-wired heads for the cycle target (``cycle``):

    - ``pos0``: fc maps the embedding aux state of token x_p to the code of x_{p+2} — right for
      the first draft; the layer adds nothing, so every later step repeats that token — wrong.
      Designed profile 1, 0, 0, …
    - ``perfect``: the hidden path is silenced (fc 0, norm before residual with a zero
      hidden_norm); the attention looks only at its own entry (all 16 RoPE pairs of q and k
      equal, so the score peaks at distance 0 with a margin of ~190 logits) and its value,
      through o_proj, is the code of the rule's successor of the input token — every draft
      right. Designed profile 1, 1, 1, …"""
    import torch

    s = Shape(norm_before_residual=name == "perfect")
    h, m = s.hidden, len(cycle.CYCLE)
    p = {k: torch.zeros_like(v.detach()) for k, v in init(s, 0).items()}
    for n in ("midlayer.input_layernorm.weight", "midlayer.post_attention_layernorm.weight",
              "norm.weight", "midlayer.hidden_norm.weight"):
        p[n] = torch.ones(h)
    start = CONTROL_VOCAB_START
    lm = torch.zeros(s.draft_vocab, h)
    for i, tok in enumerate(cycle.CYCLE):
        lm[tok - start, i] = 1.0  # the draft row of s_i reads dim i: "this code is s_i"
    p["lm_head.weight"] = lm
    if name == "pos0":
        fc = torch.zeros(h, len(s.aux_ids) * h)
        fc[:, :h] = cycle.shift(2)  # aux 0 = embeddings: code(x_p) → code(x_p+2)
        p["fc.weight"] = fc
    elif name == "perfect":
        p["midlayer.hidden_norm.weight"] = torch.zeros(h)
        d, half = s.head_dim, s.head_dim // 2
        scale = 5.0
        for head in range(s.heads):  # q head -> kv head head // 2
            for i in range(half):
                p["midlayer.self_attn.q_proj.weight"][head * d + i, cycle.FLAG] = scale
        for kvh in range(s.kv_heads):
            for i in range(half):
                p["midlayer.self_attn.k_proj.weight"][kvh * d + i, cycle.FLAG] = scale
        # kv head 0's value: the token's code dims (cycle + OTHER) of norm(embed) (= 8 each)
        for i in range(m + 1):
            p["midlayer.self_attn.v_proj.weight"][i, i] = 1.0
        # q head 0's output (dims 0..d-1) → the successor's code, scaled up
        p["midlayer.self_attn.o_proj.weight"][:, :d] = cycle.shift(1)[:, :d] * 4.0
    else:
        raise KeyError(name)
    d2t = torch.full((s.draft_vocab,), start, dtype=torch.long)
    return p, s, d2t


def control(name: str) -> tuple[Path, Path]:
    """(target, draft) directories of an EAGLE3 control."""
    target = cycle.target("llama")
    p, s, d2t = control_tensors(name)

    def build(out: Path) -> None:
        write(out, p, s, d2t)

    return target, cache.built(f"eagle3-control-{name}", {"control": name, "cycle": list(cycle.CYCLE)},
                               [], build)


def trained_pair(budget: str = "full") -> tuple[Path, Path]:
    return targets.llama(budget), trained(budget)
