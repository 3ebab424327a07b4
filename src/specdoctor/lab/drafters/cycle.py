"""The control target: a model whose greedy text is known in advance, so that hand-wired drafters
can be right or wrong exactly where they are designed to be.

Its layers are silenced (every attention output and MLP down projection is zero), so the
residual stream is the token's embedding all the way up; the embedding and the LM head form a
lookup table over a few one-hot hidden dimensions:

- ``CYCLE`` tokens s_0 .. s_{m-1} own dims 0..m-1; every other token shares dim ``OTHER``;
- every real token also carries the ``FLAG`` dim (a drafter can tell a target hidden state or a
  target embedding from its own output by it); the mask token carries ``MASK`` only;
- greedy rule: s_i → s_{i+1 mod m}, any other token → s_0.

After one generated token every request walks the cycle forever, whatever the prompt. The
logit margins are large (8 against 0 in fp32), so the greedy choice is exact on any backend.
The same table is written as a Llama (EAGLE3), a Qwen3 (DFlash) and a MiMo (MTP) target.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.lab.drafters import cache

if TYPE_CHECKING:
    import torch

# Ordinary tokens of the lab tokenizer (ids from its BPE, so they decode to text); any ids
# outside the special tokens 0..2 would do.
CYCLE = (300, 301, 302, 303, 304, 305, 306, 307)
OTHER = len(CYCLE)
FLAG = OTHER + 1
MASK = OTHER + 2
MASK_TOKEN = 2  # <|pad|>: the DFlash mask token
HIDDEN = 128
VOCAB = 1024
LAYERS = 2
HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 4, 2, 32, 384


def next_token(t: int) -> int:
    """The control target's greedy rule."""
    return CYCLE[(CYCLE.index(t) + 1) % len(CYCLE)] if t in CYCLE else CYCLE[0]


def code(t: int) -> list[int]:
    """The hidden dims a token's embedding sets to 1."""
    if t == MASK_TOKEN:
        return [MASK]
    return [CYCLE.index(t) if t in CYCLE else OTHER, FLAG]


def embedding() -> torch.Tensor:
    import torch

    e = torch.zeros(VOCAB, HIDDEN)
    for t in range(VOCAB):
        e[t, code(t)] = 1.0
    return e


def lm_head() -> torch.Tensor:
    """Row of s_{i+1} reads dim i; row of s_0 also reads OTHER; every other row is zero."""
    import torch

    w = torch.zeros(VOCAB, HIDDEN)
    for i, t in enumerate(CYCLE):
        w[next_token(t), i] = 1.0
    w[CYCLE[0], OTHER] = 1.0
    return w


def shift(n: int) -> torch.Tensor:
    """[HIDDEN, HIDDEN] map of a token's code to the code of the token n rule-steps later
    (cycle dims and OTHER; other dims dropped)."""
    import torch

    m = len(CYCLE)
    p = torch.zeros(HIDDEN, HIDDEN)
    for i in range(m):
        p[(i + n) % m, i] = 1.0
    if n > 0:
        p[(n - 1) % m, OTHER] = 1.0  # other → s_0 → s_1 …
    else:
        p[OTHER, OTHER] = 1.0
    return p


def _layer_tensors(prefix: str, qwen3: bool, bias: bool) -> dict[str, torch.Tensor]:
    import torch

    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    t = {
        f"{prefix}.self_attn.q_proj.weight": torch.zeros(q, HIDDEN),
        f"{prefix}.self_attn.k_proj.weight": torch.zeros(kv, HIDDEN),
        f"{prefix}.self_attn.v_proj.weight": torch.zeros(kv, HIDDEN),
        f"{prefix}.self_attn.o_proj.weight": torch.zeros(HIDDEN, q),
        f"{prefix}.mlp.gate_proj.weight": torch.zeros(INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.up_proj.weight": torch.zeros(INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.down_proj.weight": torch.zeros(HIDDEN, INTERMEDIATE),
        f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN),
    }
    if qwen3:
        t[f"{prefix}.self_attn.q_norm.weight"] = torch.ones(HEAD_DIM)
        t[f"{prefix}.self_attn.k_norm.weight"] = torch.ones(HEAD_DIM)
    if bias:
        for p, n in (("q", q), ("k", kv), ("v", kv)):
            t[f"{prefix}.self_attn.{p}_proj.bias"] = torch.zeros(n)
    return t


def target_tensors(arch: str) -> dict[str, torch.Tensor]:
    import torch

    t: dict[str, torch.Tensor] = {"model.embed_tokens.weight": embedding(),
                                  "model.norm.weight": torch.ones(HIDDEN),
                                  "lm_head.weight": lm_head()}
    for i in range(LAYERS):
        t.update(_layer_tensors(f"model.layers.{i}", qwen3=arch == "qwen3", bias=arch == "mimo"))
    return t


def base_config() -> dict[str, Any]:
    return {
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6, "hidden_act": "silu",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
        "dtype": "float32",
    }


def target_config(arch: str) -> dict[str, Any]:
    from specdoctor.lab.drafters import targets

    cfg = base_config()
    if arch == "llama":
        return {**cfg, "architectures": ["LlamaForCausalLM"], "model_type": "llama",
                "attention_bias": False, "mlp_bias": False}
    if arch == "qwen3":
        return {**targets.qwen3_config_from(cfg)}
    if arch == "mimo":
        return targets.mimo_config(cfg)
    raise ValueError(arch)


def target(arch: str, extra: dict[str, torch.Tensor] | None = None,
           config_extra: dict[str, Any] | None = None, name: str | None = None) -> Path:
    """The control target as ``arch`` (llama | qwen3 | mimo); ``extra`` tensors (MTP layers)
    are written into the same checkpoint."""
    from specdoctor.lab.drafters import targets

    tok = targets.tokenizer_dir()
    recipe = {"cycle": list(CYCLE), "arch": arch, "config_extra": config_extra or {},
              "extra": sorted(extra or {})}
    inputs = [tok / "tokenizer.json"]

    def build(out: Path) -> None:
        cache.copy_tokenizer(tok, out)
        cache.write_config(out, {**target_config(arch), **(config_extra or {})})
        cache.save_tensors(out, {**target_tensors(arch), **(extra or {})})

    if extra:
        # the extra tensors are a function of the caller's recipe, which it passes in ``name``
        recipe["extra_digest"] = _digest(extra)
    return cache.built(name or f"control-target-{arch}", recipe, inputs, build)


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    import hashlib

    h = hashlib.sha256()
    for k in sorted(tensors):
        h.update(k.encode())
        h.update(tensors[k].contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
