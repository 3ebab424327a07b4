"""DFlash drafters for a Qwen3 target: a trained block drafter, and a hand-wired control.

vLLM's DFlash drafter (``DFlashDraftModel`` → vllm/model_executor/models/qwen3_dflash.py,
proposer vllm/v1/spec_decode/dflash.py) predicts a whole block at once. After the target
verified up to position P-1 and sampled token x_P:

- context: every verified position t < P contributes K/V computed from
  ``hidden_norm(fc(concat of the target's aux states at t))`` (aux = ``target_layer_ids``
  plus one: DFlash counts layer outputs, EAGLE3 layer inputs), with RoPE at t;
- query block: ``[x_P, mask, …, mask]`` (``dflash_config.mask_token_id``, k masks) at
  positions P..P+k, embedded with the target's own embeddings, through the drafter's Qwen3
  layers, attending to the context and — non-causal unless the config says causal — to the
  whole block;
- draft j is the target LM head's argmax at mask j (position P+1+j).

Training samples anchors P on the target's greedy text and applies exactly that mask, so the
trained drafter is non-causal within its block (serving it causal is Case A's hypothesis).
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

ARCH = "DFlashDraftModel"
MASK_TOKEN = 2  # <|pad|>: never in the text, so its (target) embedding only ever means "mask"


@dataclass(frozen=True)
class Shape(nn.LayerShape):
    layers: int = 2
    vocab: int = 1024
    # DFlash convention: outputs of layers 0 and 1 (vLLM reads aux states 1 and 2)
    target_layer_ids: tuple[int, ...] = (0, 1)
    causal: bool = False
    window: int | None = None  # sliding window (dflash_config use_swa + swa_window_size)

    @property
    def aux_ids(self) -> tuple[int, ...]:
        return tuple(i + 1 for i in self.target_layer_ids)


@dataclass(frozen=True)
class Recipe:
    shape: Shape = Shape()
    # a block drafter learns from fewer labels per sequence than a chain drafter: more text
    data: targets.DataRecipe = targets.DataRecipe(sequences=2048)
    fit: FitRecipe = FitRecipe(steps=3000, batch=16)  # 2000 steps reach 0.593 at position 0
    block: int = 3  # masked positions per training block = the k it is trained for
    anchors: int = 24  # blocks per sequence per step
    init_seed: int = 0


RECIPES = {
    "full": Recipe(),
    "ci": Recipe(data=targets.DataRecipe(sequences=64), fit=FitRecipe(steps=40, batch=8,
                                                                       warmup=10)),
}


def config(s: Shape, block: int) -> dict[str, Any]:
    return {
        "architectures": [ARCH], "model_type": "qwen3",
        "hidden_size": s.hidden, "intermediate_size": s.intermediate,
        "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
        "num_key_value_heads": s.kv_heads, "head_dim": s.head_dim, "rms_norm_eps": nn.EPS,
        "hidden_act": "silu",
        "rope_parameters": {"rope_type": "default", "rope_theta": s.rope_theta},
        "max_position_embeddings": 2048, "vocab_size": s.vocab, "target_hidden_size": s.hidden,
        "tie_word_embeddings": False, "attention_bias": False, "use_sliding_window": False,
        # all full attention: vLLM reads that as non-causal (sliding layers would be causal)
        "layer_types": ["full_attention"] * s.layers,
        "block_size": block + 1,
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "dtype": "float32",
        "dflash_config": {"mask_token_id": MASK_TOKEN,
                          "target_layer_ids": list(s.target_layer_ids),
                          **({"causal": True} if s.causal else {}),
                          **({"use_swa": True, "swa_window_size": s.window} if s.window else {})},
    }


def init(s: Shape, seed: int) -> dict[str, torch.Tensor]:
    import torch

    g = torch.Generator().manual_seed(seed)
    q, kv, h, d = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.hidden, s.head_dim

    def rnd(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.02).requires_grad_()

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n).requires_grad_()

    p = {"fc.weight": rnd(h, len(s.target_layer_ids) * h), "hidden_norm.weight": ones(h),
         "norm.weight": ones(h)}
    for i in range(s.layers):
        a = f"layers.{i}"
        p.update({
            f"{a}.self_attn.q_proj.weight": rnd(q, h), f"{a}.self_attn.k_proj.weight": rnd(kv, h),
            f"{a}.self_attn.v_proj.weight": rnd(kv, h), f"{a}.self_attn.o_proj.weight": rnd(h, q),
            f"{a}.self_attn.q_norm.weight": ones(d), f"{a}.self_attn.k_norm.weight": ones(d),
            f"{a}.mlp.gate_proj.weight": rnd(s.intermediate, h),
            f"{a}.mlp.up_proj.weight": rnd(s.intermediate, h),
            f"{a}.mlp.down_proj.weight": rnd(h, s.intermediate),
            f"{a}.input_layernorm.weight": ones(h),
            f"{a}.post_attention_layernorm.weight": ones(h),
        })
    return p


def forward(p: dict[str, torch.Tensor], s: Shape, embed: torch.Tensor, head: torch.Tensor,
            aux: torch.Tensor, ids: torch.Tensor, anchors: torch.Tensor, k: int,
            causal: bool | None = None) -> torch.Tensor:
    """Target-vocabulary logits [B, A, k] for blocks anchored at ``anchors`` [B, A].

    ``aux`` [B, T, n*H]: the target's aux states; ``ids`` [B, T]: the text (only x_P is read
    at each anchor); ``causal`` overrides the shape's mode (to serve it the other way)."""
    import torch

    causal = s.causal if causal is None else causal
    b, t = ids.shape
    a = anchors.shape[1]
    n = k + 1
    ctx = nn.rms_norm(aux @ p["fc.weight"].T, p["hidden_norm.weight"])
    offs = torch.arange(n)
    qpos = (anchors[..., None] + offs).flatten(1)  # [B, A*n]
    tok = torch.full((b, a, n), MASK_TOKEN, dtype=ids.dtype)
    tok[..., 0] = torch.gather(ids, 1, anchors)
    h = embed[tok.flatten(1)]
    # mask [B, A*n, T + A*n]: context before the anchor; the own block (all, or causal)
    see_ctx = torch.arange(t)[None, None, :] < anchors.repeat_interleave(n, 1)[..., None]
    if s.window:  # vLLM's CPU attention: symmetric |q - k| < W (see experiments/masks)
        see_ctx = see_ctx & (qpos[..., None] - torch.arange(t) < s.window)
    blk = torch.arange(a).repeat_interleave(n)
    same = blk[:, None] == blk[None, :]
    if causal:
        same = same & (offs.repeat(a)[:, None] >= offs.repeat(a)[None, :])
    if s.window:
        same = same & ((offs.repeat(a)[:, None] - offs.repeat(a)[None, :]).abs() < s.window)
    mask = torch.cat([see_ctx, same[None].expand(b, -1, -1)], -1)
    cpos = torch.arange(t).expand(b, t)
    residual = None
    for i in range(s.layers):
        L = f"layers.{i}.self_attn"
        kc = nn.rope(nn.rms_norm(nn.heads(ctx @ p[f"{L}.k_proj.weight"].T, s.kv_heads),
                                 p[f"{L}.k_norm.weight"]), cpos, s.rope_theta)
        vc = nn.heads(ctx @ p[f"{L}.v_proj.weight"].T, s.kv_heads)
        residual = h if residual is None else h + residual
        x = nn.rms_norm(residual, p[f"layers.{i}.input_layernorm.weight"])
        q = nn.rope(nn.rms_norm(nn.heads(x @ p[f"{L}.q_proj.weight"].T, s.heads),
                                p[f"{L}.q_norm.weight"]), qpos, s.rope_theta)
        kq = nn.rope(nn.rms_norm(nn.heads(x @ p[f"{L}.k_proj.weight"].T, s.kv_heads),
                                 p[f"{L}.k_norm.weight"]), qpos, s.rope_theta)
        vq = nn.heads(x @ p[f"{L}.v_proj.weight"].T, s.kv_heads)
        att = nn.attend(q, torch.cat([kc, kq], 1), torch.cat([vc, vq], 1), mask)
        residual = att @ p[f"{L}.o_proj.weight"].T + residual
        x = nn.rms_norm(residual, p[f"layers.{i}.post_attention_layernorm.weight"])
        h = nn.swiglu(x, p[f"layers.{i}.mlp.gate_proj.weight"],
                      p[f"layers.{i}.mlp.up_proj.weight"], p[f"layers.{i}.mlp.down_proj.weight"])
    out = nn.rms_norm(h + residual, p["norm.weight"]).view(b, a, n, -1)[:, :, 1:]
    return out @ head.T


def labels(greedy: torch.Tensor, anchors: torch.Tensor, k: int) -> torch.Tensor:
    """[B, A, k]: mask j of the block at P stands at P+1+j; its answer is greedy[P+j]
    (-1 past the end)."""
    import torch

    t = greedy.shape[1]
    idx = anchors[..., None] + torch.arange(k)
    out = torch.gather(greedy, 1, idx.clamp(max=t - 1).flatten(1)).view(idx.shape)
    return out.masked_fill(idx > t - 1, -1)


# -- trained ----------------------------------------------------------------------------------

def trained(budget: str = "full", window: int | None = None) -> Path:
    """The lab's DFlash drafter trained at ``budget``; with ``window``, every layer trained to
    attend within that sliding window (written to its config as use_swa, swa_window_size)."""
    r = RECIPES[budget]
    if window is not None:
        r = replace(r, shape=replace(r.shape, window=window))
    target = targets.qwen3(budget)
    recipe = {"method": "dflash", **_key(r), "target": target.name}
    return cache.built("dflash-trained", recipe, [target / "model.safetensors"],
                       lambda out: _train_into(out, target, r))


def trained_pair(budget: str = "full") -> tuple[Path, Path]:
    return targets.qwen3(budget), trained(budget)


def _key(r: Recipe) -> dict[str, Any]:
    return {"shape": asdict(r.shape), "data": asdict(r.data), "fit": r.fit.key(),
            "block": r.block, "anchors": r.anchors, "init_seed": r.init_seed}


def _train_into(out: Path, target: Path, r: Recipe) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    t0 = time.perf_counter()
    inputs = targets.training_inputs(target, r.data, threads=r.fit.threads)
    data, embed, head = inputs.data, inputs.embed, inputs.head
    s = r.shape
    p = init(s, r.init_seed)
    aux = torch.cat([data.aux[i] for i in s.aux_ids], -1)
    t = data.ids.shape[1]
    g = torch.Generator().manual_seed(r.fit.seed + 1)

    def loss_fn(rows: torch.Tensor) -> torch.Tensor:
        anchors = torch.randint(1, t - r.block, (len(rows), r.anchors), generator=g)
        logits = forward(p, s, embed, head, aux[rows], data.ids[rows], anchors, r.block)
        lab = labels(data.greedy[rows], anchors, r.block)
        return F.cross_entropy(logits.flatten(0, 2), lab.flatten(), ignore_index=-1)

    rep = fit(p, loss_fn, data.ids.shape[0], r.fit, name="dflash")
    write(out, p, s, r.block)
    return {**rep, "seconds": round(time.perf_counter() - t0, 1)}


def write(out: Path, p: dict[str, torch.Tensor], s: Shape, block: int) -> None:
    cache.write_config(out, config(s, block))
    cache.save_tensors(out, {k: v.detach() for k, v in p.items()})


def load(draft: Path) -> tuple[dict[str, torch.Tensor], Shape]:
    import json

    c = json.loads((draft / "config.json").read_text())
    dc = c.get("dflash_config") or {}
    s = Shape(hidden=c["hidden_size"], heads=c["num_attention_heads"],
              kv_heads=c["num_key_value_heads"], intermediate=c["intermediate_size"],
              layers=c["num_hidden_layers"], vocab=c["vocab_size"],
              target_layer_ids=tuple(dc["target_layer_ids"]),
              rope_theta=c["rope_parameters"]["rope_theta"], causal=bool(dc.get("causal", False)),
              window=dc.get("swa_window_size") if dc.get("use_swa") else None)
    return cache.load_tensors(draft), s


# -- control (on the cycle target) ---------------------------------------------------------------

def control_tensors(name: str) -> tuple[dict[str, torch.Tensor], Shape]:
    """``pos0``: the context is silenced (fc 0); every mask query looks only at the block's
    first token — q from the mask dim, k from the flag dim, both in the slowest RoPE pair
    (1.8e-4 rad per position, so the score is position-free) and scaled by q_norm/k_norm to
    ~90 logits against 0 for every other key; the value carries that token's code, and the
    target's own LM head turns code(x_P) into x_P+1: the first draft is right, and every
    mask drafts the same token, so the later ones are wrong. Designed profile 1, 0, 0, …"""
    import torch

    if name != "pos0":
        raise KeyError(name)
    s = Shape(layers=1)
    h, d, m = s.hidden, s.head_dim, len(cycle.CYCLE)
    p = {k: torch.zeros_like(v.detach()) for k, v in init(s, 0).items()}
    for n in ("hidden_norm.weight", "norm.weight", "layers.0.input_layernorm.weight",
              "layers.0.post_attention_layernorm.weight"):
        p[n] = torch.ones(h)
    slow = d // 2 - 1  # first component of the slowest rotary pair
    qn = torch.ones(d)
    qn[slow] = 4.0
    p["layers.0.self_attn.q_norm.weight"] = qn
    p["layers.0.self_attn.k_norm.weight"] = qn.clone()
    p["layers.0.self_attn.q_proj.weight"][slow, cycle.MASK] = 1.0  # q head 0
    p["layers.0.self_attn.k_proj.weight"][slow, cycle.FLAG] = 1.0  # kv head 0
    for i in range(m + 1):
        p["layers.0.self_attn.v_proj.weight"][i, i] = 1.0  # kv head 0: the code dims
    o = torch.zeros(h, s.heads * d)
    for i in range(m + 1):
        o[i, i] = 4.0  # q head 0's output → the code, as is
    p["layers.0.self_attn.o_proj.weight"] = o
    return p, s


def control(name: str) -> tuple[Path, Path]:
    target = cycle.target("qwen3")
    p, s = control_tensors(name)
    return target, cache.built(f"dflash-control-{name}",
                               {"control": name, "cycle": list(cycle.CYCLE)}, [],
                               lambda out: write(out, p, s, 3))
