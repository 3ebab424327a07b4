"""MTP drafters on a MiMo target: a trained multi-token-prediction layer, and hand-wired controls.

vLLM's MiMo MTP (vllm/model_executor/models/mimo_mtp.py) ships inside the target checkpoint
(``model.mtp_layers.0.*``) and shares the target's embeddings and LM head. One step:

    x   = input_proj([hidden_layernorm(h), token_layernorm(embed(token))])  (embed zeroed at
          position 0)
    out = final_layernorm(x + Qwen2DecoderLayer(x))        → logits = lm_head(out)

The first step takes the target's last hidden state (before its final norm) at position i with
token i+1; every further step (``num_speculative_tokens`` > 1) feeds ``out`` back with the token
it drafted — the one layer run recursively, with a warning in vLLM's log. The layer is trained
for one step, as real MTP layers are; vLLM's default lab k is 2 (recursion once, as deployed
in Case B), and serving it far past that is the ``k-beyond-training`` fault.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.lab.drafters import cache, cycle, nn, targets
from specdoctor.lab.drafters.fit import FitRecipe, fit

if TYPE_CHECKING:
    import torch

PREFIX = "model.mtp_layers.0."


Shape = nn.LayerShape  # the MTP layer is one decoder layer of the target's shape


@dataclass(frozen=True)
class Recipe:
    shape: Shape = Shape()
    data: targets.DataRecipe = targets.DataRecipe()
    fit: FitRecipe = FitRecipe(steps=300, batch=16)
    # One step, as MiMo's and DeepSeek's MTP layers are trained (each predicts one token
    # further); vLLM runs it recursively for k > 1. The fault clinic trains one for 6 steps as
    # the counterfactual of the k-beyond-training fault.
    steps: int = 1
    init_seed: int = 0


RECIPES = {
    "full": Recipe(),
    "ci": Recipe(data=targets.DataRecipe(sequences=64), fit=FitRecipe(steps=40, batch=8,
                                                                       warmup=10)),
}


def init(s: Shape, seed: int) -> dict[str, torch.Tensor]:
    import torch

    g = torch.Generator().manual_seed(seed)
    q, kv, h = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.hidden

    def rnd(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.02).requires_grad_()

    def zeros(n: int) -> torch.Tensor:
        return torch.zeros(n).requires_grad_()

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n).requires_grad_()

    return {
        "token_layernorm.weight": ones(h), "hidden_layernorm.weight": ones(h),
        "input_proj.weight": rnd(h, 2 * h), "final_layernorm.weight": ones(h),
        "input_layernorm.weight": ones(h), "post_attention_layernorm.weight": ones(h),
        "self_attn.q_proj.weight": rnd(q, h), "self_attn.q_proj.bias": zeros(q),
        "self_attn.k_proj.weight": rnd(kv, h), "self_attn.k_proj.bias": zeros(kv),
        "self_attn.v_proj.weight": rnd(kv, h), "self_attn.v_proj.bias": zeros(kv),
        "self_attn.o_proj.weight": rnd(h, q),
        "mlp.gate_proj.weight": rnd(s.intermediate, h), "mlp.up_proj.weight": rnd(s.intermediate, h),
        "mlp.down_proj.weight": rnd(h, s.intermediate),
    }


def forward(p: dict[str, torch.Tensor], s: Shape, embed: torch.Tensor, head: torch.Tensor,
            last_hidden: torch.Tensor, ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Target-vocabulary logits of every step for every start, [B, T, V] each.

    ``last_hidden`` [B, T, H]: the target's last-layer output before its final norm. Entry i of
    step j holds token i+1+j at position i+j and predicts token i+2+j."""
    import torch

    b, t = ids.shape
    ids_ext = torch.cat([ids, torch.zeros(b, steps, dtype=ids.dtype)], 1)
    hidden = last_hidden
    keys: list[torch.Tensor] = []
    vals: list[torch.Tensor] = []
    out = []
    base = torch.arange(t)
    for j in range(steps):
        pos = base + j
        e = embed[ids_ext[:, 1 + j:1 + j + t]] * (pos != 0)[None, :, None]
        x = torch.cat([nn.rms_norm(hidden, p["hidden_layernorm.weight"]),
                       nn.rms_norm(e, p["token_layernorm.weight"])], -1) @ p["input_proj.weight"].T
        y = nn.rms_norm(x, p["input_layernorm.weight"])

        def proj(n: str, y: torch.Tensor = y) -> torch.Tensor:
            return y @ p[f"self_attn.{n}_proj.weight"].T + p[f"self_attn.{n}_proj.bias"]

        q = nn.rope(nn.heads(proj("q"), s.heads), pos, s.rope_theta)
        k = nn.rope(nn.heads(proj("k"), s.kv_heads), pos, s.rope_theta)
        keys.append(k)
        vals.append(nn.heads(proj("v"), s.kv_heads))
        a = nn.attend(q, torch.cat(keys, 1), torch.cat(vals, 1), nn.ttt_mask(t, j))
        r = a @ p["self_attn.o_proj.weight"].T + x
        m = nn.swiglu(nn.rms_norm(r, p["post_attention_layernorm.weight"]),
                      p["mlp.gate_proj.weight"], p["mlp.up_proj.weight"], p["mlp.down_proj.weight"])
        hidden = nn.rms_norm(m + r, p["final_layernorm.weight"])
        out.append(hidden @ head.T)
    return out


# -- the served checkpoint: a MiMo body with its MTP layer ---------------------------------------

def write(out: Path, body_config: dict[str, Any], body: dict[str, torch.Tensor],
          p: dict[str, torch.Tensor], tokenizer: Path) -> None:
    # What the layer was trained for (steps) stays in the build record, never in the config:
    # the served config must not tell a k-beyond-training fault apart.
    cfg = targets.mimo_config(body_config)
    cache.copy_tokenizer(tokenizer, out)
    cache.write_config(out, cfg)
    cache.save_tensors(out, {**body, **{PREFIX + k: v.detach() for k, v in p.items()}})


# -- trained ----------------------------------------------------------------------------------

def trained(budget: str = "full", steps: int | None = None) -> Path:
    """The MiMo target (the trained lab Llama as a Qwen2 body) with its trained MTP layer
    (``steps``: another training-time-test unroll, for reference runs)."""
    r = RECIPES[budget] if steps is None else replace(RECIPES[budget], steps=steps)
    llama = targets.llama(budget)
    recipe = {"method": "mtp", **_key(r), "target": llama.name}
    return cache.built("mimo-mtp-trained", recipe, [llama / "model.safetensors"],
                       lambda out: _train_into(out, llama, r))


def trained_pair(budget: str = "full") -> tuple[Path, None]:
    return trained(budget), None


def _key(r: Recipe) -> dict[str, Any]:
    return {"shape": asdict(r.shape), "data": asdict(r.data), "fit": r.fit.key(),
            "steps": r.steps, "init_seed": r.init_seed}


def _train_into(out: Path, llama: Path, r: Recipe) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    t0 = time.perf_counter()
    # The MiMo body computes the Llama's function exactly, so its text and states are the
    # Llama's.
    inputs = targets.training_inputs(llama, r.data, threads=r.fit.threads)
    data, tt, embed, head = inputs.data, inputs.tensors, inputs.embed, inputs.head
    s = r.shape
    p = init(s, r.init_seed)
    t = data.ids.shape[1]

    def loss_fn(rows: torch.Tensor) -> torch.Tensor:
        logits = forward(p, s, embed, head, data.aux[-1][rows], data.ids[rows], r.steps)
        total = torch.zeros(())
        for j, lg in enumerate(logits):
            total = total + F.cross_entropy(lg[:, :t - 1 - j].flatten(0, 1),
                                            data.greedy[rows, 1 + j:].flatten())
        return total / len(logits)

    rep = fit(p, loss_fn, data.ids.shape[0], r.fit, name="mtp")
    body_cfg = json.loads((llama / "config.json").read_text())
    write(out, body_cfg, targets.mimo_body_tensors(tt), p, targets.tokenizer_dir())
    return {**rep, "seconds": round(time.perf_counter() - t0, 1)}


# -- controls (on the cycle target) --------------------------------------------------------------

def control_tensors(name: str) -> tuple[dict[str, torch.Tensor], Shape]:
    """Hand-wired MTP layers for the cycle target. The decoder block is silenced, so the step's
    output is ``input_proj`` of its two normalised inputs:

    - ``perfect``: input_proj passes the token's code through; the target's LM head turns
      code(token) into its successor: every step right. Designed profile 1, 1, 1, …
    - ``pos0``: as ``perfect``, plus the flag dim (set in the target's hidden states and
      embeddings, never in the layer's own output) is wired to cancel exactly when it comes
      from both inputs: the first step (target hidden state) is right; at every recursive step
      (own output) the code dims are pushed below every non-cycle row, so it drafts a
      non-cycle token — wrong. Designed profile 1, 0, 0, … (a known answer for the
      k-beyond-training signature)."""
    import torch

    if name not in ("pos0", "perfect"):
        raise KeyError(name)
    s = Shape()
    h, m = s.hidden, len(cycle.CYCLE)
    p = {k: torch.zeros_like(v.detach()) for k, v in init(s, 0).items()}
    for n in ("token_layernorm.weight", "hidden_layernorm.weight", "final_layernorm.weight",
              "input_layernorm.weight", "post_attention_layernorm.weight"):
        p[n] = torch.ones(h)
    w = torch.zeros(h, 2 * h)
    for i in range(m + 1):
        w[i, h + i] = 1.0  # token half: code dims as they are
    if name == "pos0":
        beta = 2.0
        w[: m + 1, h + cycle.FLAG] = -beta  # from the token's flag: always
        w[: m + 1, cycle.FLAG] = beta  # from the hidden's flag: only from the target
    p["input_proj.weight"] = w
    return p, s


def control(name: str) -> tuple[Path, None]:
    p, s = control_tensors(name)
    extra = {PREFIX + k: v for k, v in p.items()}
    return cycle.target("mimo", extra=extra, name=f"mtp-control-{name}"), None
