"""One decoder layer's parameters as the drafters use them (Llama, Qwen2 biases, Qwen3 q/k
norms), read from a checkpoint's tensors under one prefix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specdoctor.oracle.heads import ops
from specdoctor.oracle.heads.checkpoint import take

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Attention:
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope: ops.Rope


@dataclass
class LayerWeights:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: torch.Tensor
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor
    input_norm: torch.Tensor
    post_norm: torch.Tensor
    q_bias: torch.Tensor | None = None
    k_bias: torch.Tensor | None = None
    v_bias: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None

    @classmethod
    def read(cls, t: dict[str, torch.Tensor], prefix: str, what: str) -> LayerWeights:
        a, m = prefix + "self_attn.", prefix + "mlp."
        return cls(
            q=take(t, a + "q_proj.weight", what), k=take(t, a + "k_proj.weight", what),
            v=take(t, a + "v_proj.weight", what), o=take(t, a + "o_proj.weight", what),
            gate=take(t, m + "gate_proj.weight", what), up=take(t, m + "up_proj.weight", what),
            down=take(t, m + "down_proj.weight", what),
            input_norm=take(t, prefix + "input_layernorm.weight", what),
            post_norm=take(t, prefix + "post_attention_layernorm.weight", what),
            q_bias=t.get(a + "q_proj.bias"), k_bias=t.get(a + "k_proj.bias"),
            v_bias=t.get(a + "v_proj.bias"), q_norm=t.get(a + "q_norm.weight"),
            k_norm=t.get(a + "k_norm.weight"))

    def to(self, device: str, dtype: torch.dtype) -> LayerWeights:
        import dataclasses

        return LayerWeights(**{f.name: (None if getattr(self, f.name) is None
                                        else getattr(self, f.name).to(device, dtype))
                               for f in dataclasses.fields(self)})

    def q_heads(self, x: torch.Tensor, a: Attention, pos: torch.Tensor) -> torch.Tensor:
        return self._proj(x, self.q, self.q_bias, self.q_norm, a.heads, a, pos)

    def k_heads(self, x: torch.Tensor, a: Attention, pos: torch.Tensor) -> torch.Tensor:
        return self._proj(x, self.k, self.k_bias, self.k_norm, a.kv_heads, a, pos)

    def v_heads(self, x: torch.Tensor, a: Attention) -> torch.Tensor:
        return ops.heads(ops.linear(x, self.v, self.v_bias), a.kv_heads)

    @staticmethod
    def _proj(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
              norm: torch.Tensor | None, n: int, a: Attention, pos: torch.Tensor
              ) -> torch.Tensor:
        h = ops.heads(ops.linear(x, w, b), n)
        if norm is not None:
            h = ops.rms_norm(h, norm, a.eps)
        return ops.rope(h, pos, a.rope)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return ops.swiglu(x, self.gate, self.up, self.down)


def attention_shape(cfg: dict[str, object], rope_cfg: dict[str, object] | None = None
                    ) -> Attention:
    from specdoctor.oracle.heads.checkpoint import need

    heads = int(need(cfg, "num_attention_heads", "drafter", "the model config"))  # type: ignore[arg-type]
    hidden = int(need(cfg, "hidden_size", "drafter", "the model config"))  # type: ignore[arg-type]
    head_dim = int(cfg.get("head_dim") or hidden // heads)  # type: ignore[call-overload]
    kv = int(cfg.get("num_key_value_heads") or heads)  # type: ignore[call-overload]
    eps = float(cfg.get("rms_norm_eps", 1e-6))  # type: ignore[arg-type]
    return Attention(heads, kv, head_dim, eps,
                     ops.rope_from_config(dict(rope_cfg or cfg), head_dim))
