"""The targets the drafters speculate for, and what a drafter learns from them.

- ``llama(budget)``: the lab's trained target (``lab.train``), for EAGLE3.
- ``qwen3(budget)``: the trained Llama turned into a Qwen3 (plus per-head q/k norms, briefly
  fine-tuned), for DFlash (vLLM's DFlash drafter is a Qwen3 model reading a Qwen3 target).
- ``mimo_body(budget)``: the trained Llama rewritten as a MiMo (Qwen2) body, for MTP; Qwen2 is
  Llama with q/k/v biases, so zero biases give the very same function.
- ``greedy_data()``: corpus openings continued greedily by a target — the text a drafter sees
  when served greedily — with the target's hidden states at every layer and its greedy label
  at every position.

All targets share the lab tokenizer. Qwen-typed model directories make transformers (and so
vLLM) pick a Qwen2 tokenizer class that splits text differently, so servers of these targets
are started with ``--tokenizer`` pointing at ``tokenizer_dir()``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.errors import LabError
from specdoctor.lab.drafters import cache
from specdoctor.lab.models import TinyLlamaSpec, target_model

if TYPE_CHECKING:
    import torch


BUDGETS = ("full", "ci")


def tokenizer_dir() -> Path:
    """The lab tokenizer (kept beside the random lab target)."""
    return target_model()


def llama(budget: str = "full") -> Path:
    from specdoctor.lab import train

    return train.trained_target(budget)


def _check_budget(budget: str) -> None:
    if budget not in BUDGETS:
        raise LabError(f"unknown training budget {budget!r}", f"choose one of: {', '.join(BUDGETS)}")


# -- Qwen3 (DFlash) ------------------------------------------------------------------------------

def qwen3_config(spec: TinyLlamaSpec) -> dict[str, Any]:
    return qwen3_config_from({
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size, "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.hidden_size // spec.num_attention_heads,
        "max_position_embeddings": spec.max_position_embeddings, "hidden_act": "silu",
        "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
        "dtype": "float32",
    })


def qwen3_config_from(base: dict[str, Any]) -> dict[str, Any]:
    n = base["num_hidden_layers"]
    return {**base, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
            "attention_bias": False, "use_sliding_window": False,
            "layer_types": ["full_attention"] * n, "max_window_layers": n}


# Fine-tuning schedule of the Qwen3 target (it starts from the trained Llama, so it needs a
# fraction of the Llama's steps).
QWEN3_STEPS = {"full": 300, "ci": 60}


def qwen3(budget: str = "full") -> Path:
    """The DFlash target: the trained lab Llama as a Qwen3 — same weights plus Qwen3's per-head
    q/k RMSNorms (initialised to the Llama's own q/k scale) — fine-tuned briefly with the lab
    recipe so the norms settle."""
    from specdoctor.lab import train

    _check_budget(budget)
    base = train.recipe("target", budget)
    r = replace(base, name="target-qwen3", steps=QWEN3_STEPS[budget], lr=1e-3,
                warmup_steps=min(base.warmup_steps, 20), data_seed=3, threads=1)
    src = llama(budget)

    def build(out: Path) -> dict[str, Any]:
        cache.copy_tokenizer(src, out)
        return train.train_lm(qwen3_from_llama(src), r, out)

    return cache.built("target-qwen3", {**r.key(), "corpus": train.corpus_digest()},
                       [src / "model.safetensors", src / "tokenizer.json"], build)


def qwen3_from_llama(src: Path) -> Any:
    """The Llama in ``src`` as a Qwen3ForCausalLM, before any fine-tuning: the same weights,
    plus q/k RMSNorms initialised to the Llama's own q/k scale."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = json.loads((src / "config.json").read_text())
    qcfg = qwen3_config_from({k: cfg[k] for k in _BASE_KEYS if k in cfg})
    model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in qcfg.items()
                                              if k != "architectures"}))
    tensors = cache.load_tensors(src)
    tensors.update(_qk_norm_init(src, qcfg))
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        raise LabError(f"cannot map the Llama onto Qwen3: missing {missing}, unexpected "
                       f"{unexpected}", "report this: the lab's Llama layout changed")
    return model.to(torch.float32)


_BASE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
              "hidden_act", "rms_norm_eps", "rope_parameters", "tie_word_embeddings",
              "bos_token_id", "eos_token_id", "pad_token_id")


def _qk_norm_init(llama_dir: Path, cfg: dict[str, Any]) -> dict[str, torch.Tensor]:
    """q_norm/k_norm weights = the mean RMS of the Llama's per-head q (k) vectors over corpus
    text, so the normalised q·k starts near the Llama's own scale."""
    import torch

    model = load_hf(llama_dir)
    d = cfg["head_dim"]
    got: dict[str, list[torch.Tensor]] = {}

    def keep(name: str):
        def hook(_m, _args, output):  # noqa: ANN001
            got.setdefault(name, []).append(output.detach().reshape(-1, d))
        return hook

    hooks = []
    for i, layer in enumerate(model.model.layers):
        hooks.append(layer.self_attn.q_proj.register_forward_hook(keep(f"{i}.q")))
        hooks.append(layer.self_attn.k_proj.register_forward_hook(keep(f"{i}.k")))
    try:
        with torch.no_grad():
            model(input_ids=corpus_prompts(16, 256, seed=7))
    finally:
        for h in hooks:
            h.remove()
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        for w in ("q", "k"):
            rms = float(torch.cat(got[f"{i}.{w}"]).pow(2).mean(-1).sqrt().mean())
            out[f"model.layers.{i}.self_attn.{w}_norm.weight"] = torch.full((d,), rms)
    return out


# -- MiMo (MTP) ----------------------------------------------------------------------------------

def mimo_config(llama_config: dict[str, Any], mtp_layers: int = 1) -> dict[str, Any]:
    keep = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
            "rms_norm_eps", "rope_parameters", "tie_word_embeddings", "bos_token_id",
            "eos_token_id", "pad_token_id", "hidden_act")
    cfg = {k: llama_config[k] for k in keep if k in llama_config}
    n = cfg["num_hidden_layers"]
    cfg.update({"architectures": ["MiMoForCausalLM"], "model_type": "qwen2",
                "num_nextn_predict_layers": mtp_layers, "use_sliding_window": False,
                "max_window_layers": n, "layer_types": ["full_attention"] * n,
                "dtype": "float32"})
    return cfg


def mimo_body_tensors(llama_tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Llama weights as a Qwen2 body: same names, plus zero q/k/v biases."""
    import torch

    out = dict(llama_tensors)
    for name, w in llama_tensors.items():
        for p in ("q_proj", "k_proj", "v_proj"):
            if name.endswith(f"self_attn.{p}.weight"):
                out[name[:-len("weight")] + "bias"] = torch.zeros(w.shape[0])
    return out


# -- what a drafter learns from ------------------------------------------------------------------

@dataclass(frozen=True)
class DataRecipe:
    sequences: int = 1536
    prompt_len: int = 32
    gen_len: int = 96
    seed: int = 0
    batch: int = 128


@dataclass
class TargetData:
    """Greedy text with the target's view of it.

    ``ids`` [N, T]: corpus openings then the target's greedy continuation; ``aux`` [L+1] of
    [N, T, H]: the residual stream entering layer i (i = 0: embeddings; i = L: the last layer's
    output before the final norm) — vLLM's aux-hidden-state numbering; ``greedy`` [N, T]: the
    target's argmax after each position (for continuation positions, the next id itself)."""

    ids: torch.Tensor
    aux: list[torch.Tensor]
    greedy: torch.Tensor
    prompt_len: int


def load_hf(model_dir: Path) -> Any:
    """The target as a transformers model (a MiMo directory loads as its Qwen2 body: the MTP
    tensors are reported unused, which is expected, so loading reports stay quiet)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32,
                                                     attn_implementation="sdpa")
    finally:
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()
    model.eval()
    return model


@dataclass(frozen=True)
class Features:
    aux: list[torch.Tensor]
    greedy: torch.Tensor


def features(model: Any, ids: torch.Tensor) -> Features:
    """Every aux hidden state and the greedy label at every position, in one forward."""
    import torch

    layers = model.model.layers
    got: dict[int, torch.Tensor] = {}

    def keep(i: int):
        def hook(_m, args, kwargs, output):  # noqa: ANN001
            got[i] = output[0] if isinstance(output, tuple) else output
        return hook

    def keep_input(_m, args, kwargs):  # noqa: ANN001
        got[0] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

    hooks = [layers[0].register_forward_pre_hook(keep_input, with_kwargs=True)]
    hooks += [layer.register_forward_hook(keep(i + 1), with_kwargs=True)
              for i, layer in enumerate(layers)]
    try:
        with torch.no_grad():
            logits = model(input_ids=ids).logits
    finally:
        for h in hooks:
            h.remove()
    return Features([got[i] for i in range(len(layers) + 1)], logits.argmax(-1))


def greedy_continue(model: Any, prompts: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy continuation by ``n`` tokens, end-of-text ignored (as the lab measures)."""
    import torch

    ids = prompts
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        for step in range(n):
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], 1)
            if step < n - 1:
                out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
    return ids


def corpus_prompts(count: int, length: int, seed: int) -> torch.Tensor:
    import numpy as np
    import torch

    from specdoctor.lab import train

    data = np.asarray(train.corpus_tokens(tokenizer_dir()), dtype=np.int64)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(data) - length, size=count)
    return torch.from_numpy(data[starts[:, None] + np.arange(length)])


@dataclass
class TrainingInputs:
    """What every drafter head trains from: the target's greedy text with its states, and the
    target's own tensors (its embedding and LM head are shared with the drafter)."""

    data: TargetData
    tensors: dict[str, Any]

    @property
    def embed(self) -> Any:
        return self.tensors["model.embed_tokens.weight"]

    @property
    def head(self) -> Any:
        return self.tensors["lm_head.weight"]


def training_inputs(model_dir: Path, d: DataRecipe, threads: int = 1) -> TrainingInputs:
    return TrainingInputs(greedy_data(model_dir, d, threads), cache.load_tensors(model_dir))


def greedy_data(model_dir: Path, d: DataRecipe = DataRecipe(), threads: int = 1) -> TargetData:
    """``d.sequences`` corpus openings continued greedily by the target, with its states;
    cached beside the models (EAGLE3 and MTP read the same Llama's text)."""
    import torch

    def build(out: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        data = _greedy_data(model_dir, d, threads)
        torch.save({"ids": data.ids, "aux": data.aux, "greedy": data.greedy,
                    "prompt_len": data.prompt_len}, out / "data.pt")
        return {"seconds": round(time.perf_counter() - t0, 1)}

    where = cache.built("greedy-data", {"data": asdict(d), "target": model_dir.name,
                                        "threads": threads},
                        [model_dir / "model.safetensors"], build)
    raw = torch.load(where / "data.pt", weights_only=True)
    return TargetData(raw["ids"], list(raw["aux"]), raw["greedy"], int(raw["prompt_len"]))


def _greedy_data(model_dir: Path, d: DataRecipe, threads: int) -> TargetData:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = load_hf(model_dir)
        prompts = corpus_prompts(d.sequences, d.prompt_len, d.seed)
        ids, aux, greedy = [], [], []
        for i in range(0, d.sequences, d.batch):
            seq = greedy_continue(model, prompts[i:i + d.batch], d.gen_len)
            f = features(model, seq)
            ids.append(seq)
            aux.append(f.aux)
            greedy.append(f.greedy)
    finally:
        torch.set_num_threads(before)
    return TargetData(torch.cat(ids), [torch.cat(a) for a in zip(*aux)], torch.cat(greedy),
                      d.prompt_len)


def data_key(d: DataRecipe) -> dict[str, Any]:
    return asdict(d)


def prompt_data(model_dir: Path, prompts: list[str], max_tokens: int, threads: int = 1
                ) -> list[TargetData]:
    """One ``TargetData`` per text prompt: its greedy continuation by ``max_tokens`` (+ a few
    tokens of slack, so the last draft of a request is judged too)."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir()))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = load_hf(model_dir)
        out = []
        for text in prompts:
            ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
            seq = greedy_continue(model, ids, max_tokens + 8)
            f = features(model, seq)
            out.append(TargetData(seq, f.aux, f.greedy, ids.shape[1]))
    finally:
        torch.set_num_threads(before)
    return out
