"""A drafter whose right target layers no file can tell, built by hand in seconds (no training):
the lab's cycle control target, deepened, with its first layer copying each token's code into a
second block of dimensions, and the lab's ``pos0`` EAGLE3 control reading that block from its
first aux state. The head drafts its first token right exactly when its first aux id is 1 or more
(a state after layer 0); with ids 0, 1, 2 (the embeddings first) it reads nothing and drafts
wrong. Every id stays inside the target, the fc's width fits, the copies agree: only acceptance
tells the sets apart.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

LAYERS = 4
BLOCK = 20          # first dim of the copied block (clear of the cycle code, OTHER, FLAG, MASK)
GATE = 8.0          # RMSNorm of a one-hot pair is 8 per dim: silu(8) ≈ 8


def build(out: Path, ids: list[int]) -> tuple[Path, Path]:
    """(target, head) directories under ``out``; the head's config names ``ids``."""
    import torch
    from safetensors.torch import load_file, save_file

    from specdoctor.lab.drafters import cycle, eagle3

    src_t, src_d = eagle3.control("pos0")
    t, d = out / "target", out / "head"
    for s, dst in ((src_t, t), (src_d, d)):
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(s, dst, ignore=shutil.ignore_patterns("specdoctor*"))
    w = load_file(str(t / "model.safetensors"))
    m = len(cycle.CYCLE) + 1                 # the cycle dims and OTHER
    p = "model.layers.0.mlp."
    gate, up, down = (torch.zeros_like(w[p + n + ".weight"]) for n in ("gate_proj", "up_proj",
                                                                      "down_proj"))
    for j in range(m):                       # unit j: silu(8 * FLAG) * code_j → dim BLOCK + j
        gate[j, cycle.FLAG] = 1.0
        up[j, j] = 1.0
        down[BLOCK + j, j] = 1.0 / (GATE * GATE)
    w.update({p + "gate_proj.weight": gate, p + "up_proj.weight": up,
              p + "down_proj.weight": down})
    save_file(w, str(t / "model.safetensors"), metadata={"format": "pt"})
    deepen(t, LAYERS)
    h = load_file(str(d / "model.safetensors"))
    fc = h["fc.weight"]
    moved = torch.zeros_like(fc)
    hidden = fc.shape[0]
    moved[:, m:hidden] = fc[:, m:hidden]
    moved[:, BLOCK:BLOCK + m] = fc[:, :m]    # read the copied block of the first aux state
    h["fc.weight"] = moved
    save_file(h, str(d / "model.safetensors"), metadata={"format": "pt"})

    def name(c: dict[str, Any]) -> None:
        c["eagle_aux_hidden_state_layer_ids"] = list(ids)
        c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(ids)
    _edit(d, name)
    return t, d


def deepen(t: Path, layers: int) -> None:
    """The target with layers appended that add nothing to its residual stream: copies of its
    last layer whose attention and MLP output projections are zero. It computes the same
    function, and every state after its last trained layer equals that layer's output."""
    import torch
    from safetensors.torch import load_file, save_file

    n = json.loads((t / "config.json").read_text())["num_hidden_layers"]
    w = load_file(str(t / "model.safetensors"))
    last = f"model.layers.{n - 1}."
    for i in range(n, layers):
        for name, x in list(w.items()):
            if name.startswith(last):
                w[f"model.layers.{i}." + name[len(last):]] = torch.zeros_like(x) if name.endswith(
                    ("o_proj.weight", "down_proj.weight")) else x.clone()
    save_file(w, str(t / "model.safetensors"), metadata={"format": "pt"})

    def grow(c: dict[str, Any]) -> None:
        c["num_hidden_layers"] = layers
        if c.get("layer_types"):
            c["layer_types"] = [c["layer_types"][0]] * layers
        if "max_window_layers" in c:
            c["max_window_layers"] = layers
    _edit(t, grow)


def _edit(d: Path, f: Any) -> None:
    cfg = json.loads((d / "config.json").read_text())
    f(cfg)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
