"""The lab's Llama models as GGUF files, for llama.cpp's server (``lab up --engine llamacpp``).

llama.cpp's own ``convert_hf_to_gguf.py`` refuses the lab tokenizer: it recognises a BPE
pre-tokenizer by the hash of its output on a fixed text, and the lab's (trained here, on the
Python standard library) is in no list ("BPE pre-tokenizer was not recognized"). Its
pre-tokenizer is GPT-2's byte-level split exactly (``ByteLevel``, ``use_regex``, no prefix
space), which llama.cpp knows as ``gpt-2``. So this module writes the file with the ``gguf``
package (llama.cpp's own writer) the way the converter writes a Llama:

- tensors renamed to llama.cpp's names; ``q_proj``/``k_proj`` rows permuted from Hugging
  Face's rotate-half RoPE layout to llama.cpp's interleaved one (the converter's
  ``LlamaModel.permute``);
- norms stay f32; matrices are f32, f16 or q8_0 (``gguf.quants``), the ``--outtype`` choices;
- the vocabulary as a ``gpt2`` tokenizer with pre-tokenizer ``gpt-2``, token types (the
  ``<|…|>`` special tokens as control tokens), merges and special ids through
  ``gguf.SpecialVocab``, as the converter's ``_set_vocab_gpt2`` does.

Every file is built once and cached beside the lab's models, keyed by the source directory's
bytes, the type and ``EXPORT_VERSION``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specdoctor.errors import LabError
from specdoctor.lab.atomic import build_dir
from specdoctor.paths import models_dir

EXPORT_VERSION = 1
TYPES = ("f32", "f16", "q8_0")
FILE_NAME = "model.gguf"
SOURCE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

# Hugging Face Llama tensor names → llama.cpp's (gguf.TENSOR_NAMES of MODEL_ARCH.LLAMA).
_TOP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf_name: str) -> str:
    """llama.cpp's name of a Hugging Face Llama tensor (LabError for one it has no place for)."""
    if hf_name in _TOP:
        return _TOP[hf_name]
    parts = hf_name.split(".", 3)
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[2].isdigit() \
            and parts[3] in _LAYER:
        return f"blk.{parts[2]}.{_LAYER[parts[3]]}"
    raise LabError(f"no GGUF name for tensor {hf_name!r}",
                   "the GGUF export takes the lab's Llama models (LlamaForCausalLM) only")


def permute_rope(weight: Any, n_head: int) -> Any:
    """q/k rows from Hugging Face's rotate-half order to llama.cpp's interleaved pairs, per
    head (the converter's ``LlamaModel.permute``; ``n_head`` is the K/V head count for k)."""
    rows = weight.shape[0]
    return (weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def fingerprint(model: Path, out_type: str) -> str:
    import hashlib

    h = hashlib.sha256(json.dumps({"export": EXPORT_VERSION, "type": out_type}).encode())
    for name in SOURCE_FILES:
        f = model / name
        if f.is_file():
            h.update(name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def exported(model: Path, out_type: str = "f32") -> Path:
    """The GGUF file of the Hugging Face Llama directory ``model``, written once."""
    if out_type not in TYPES:
        raise LabError(f"unknown GGUF type {out_type!r}", f"choose one of: {', '.join(TYPES)}")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (model / name).is_file():
            raise LabError(f"{model} has no {name}",
                           "export a lab model directory (config, safetensors weights, tokenizer)")
    out = models_dir() / "gguf" / f"{model.name}-{out_type}-{fingerprint(model, out_type)}"
    if (out / FILE_NAME).is_file():
        return out / FILE_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    build_dir(out, lambda tmp: write(model, tmp / FILE_NAME, out_type))
    return out / FILE_NAME


def write(model: Path, path: Path, out_type: str) -> None:
    """Write ``model`` (a Hugging Face LlamaForCausalLM directory) to ``path`` as GGUF."""
    try:
        import gguf
        import numpy as np
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise LabError(f"cannot write GGUF: {exc}",
                       "install llama.cpp's tools: bash scripts/install.sh llamacpp") from exc
    config = json.loads((model / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise LabError(f"{model} is a {config.get('model_type')!r} model, not a Llama",
                       "the GGUF export takes the lab's Llama models only")
    n_head = int(config["num_attention_heads"])
    n_kv = int(config.get("num_key_value_heads", n_head))
    hidden = int(config["hidden_size"])
    head_dim = int(config.get("head_dim") or hidden // n_head)
    rope = config.get("rope_parameters") or {}
    theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    if rope.get("rope_type", "default") != "default":
        raise LabError(f"RoPE type {rope.get('rope_type')!r} is not exported",
                       "the lab's Llama models use the default RoPE")
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[out_type]

    w = gguf.GGUFWriter(path, "llama")
    w.add_name(model.name)
    w.add_context_length(int(config["max_position_embeddings"]))
    w.add_embedding_length(hidden)
    w.add_block_count(int(config["num_hidden_layers"]))
    w.add_feed_forward_length(int(config["intermediate_size"]))
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    w.add_vocab_size(int(config["vocab_size"]))
    w.add_file_type(file_type)
    _add_vocab(w, model, int(config["vocab_size"]), gguf)

    tensors = load_file(str(model / "model.safetensors"))
    if config.get("tie_word_embeddings") and "lm_head.weight" in tensors:
        del tensors["lm_head.weight"]  # llama.cpp reads the embedding when output is absent
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if name.endswith("self_attn.q_proj.weight"):
            data = permute_rope(data, n_head)
        elif name.endswith("self_attn.k_proj.weight"):
            data = permute_rope(data, n_kv)
        _add_tensor(w, gguf_name(name), data, out_type, gguf, np)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _add_tensor(w: Any, name: str, data: Any, out_type: str, gguf: Any, np: Any) -> None:
    if data.ndim < 2 or out_type == "f32":   # norms stay f32, as the converter keeps them
        w.add_tensor(name, data)
    elif out_type == "f16":
        w.add_tensor(name, data.astype(np.float16))
    else:
        q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)


def _add_vocab(w: Any, model: Path, vocab_size: int, gguf: Any) -> None:
    tok = json.loads((model / "tokenizer.json").read_text())
    pre, bpe = tok.get("pre_tokenizer") or {}, tok.get("model") or {}
    if (bpe.get("type") != "BPE" or pre.get("type") != "ByteLevel" or not pre.get("use_regex", True)
            or pre.get("add_prefix_space") or tok.get("normalizer") is not None):
        raise LabError("the tokenizer is not a plain byte-level BPE (GPT-2's pre-tokenizer)",
                       "the GGUF export writes the lab's own tokenizer only")
    ids: dict[int, str] = {i: t for t, i in bpe["vocab"].items()}
    special = {int(a["id"]): a["content"] for a in tok.get("added_tokens") or []}
    ids.update(special)
    tokens, types = [], []
    for i in range(vocab_size):
        text = ids.get(i, f"[PAD{i}]")
        tokens.append(text)
        if i not in ids:
            types.append(gguf.TokenType.UNUSED)
        elif i in special:
            types.append(gguf.TokenType.CONTROL)
        else:
            types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    # merges and bos/eos/pad ids, read as the converter reads them
    special_vocab = gguf.SpecialVocab(model, load_merges=True, n_vocab=vocab_size)
    # The lab tokenizer adds no BOS (its post-processor has no special tokens), so vLLM sends
    # none; llama.cpp's default for a gpt2 vocabulary may differ, so say it.
    special_vocab.add_special_token.setdefault("bos", False)
    special_vocab.add_special_token.setdefault("eos", False)
    special_vocab.add_to_gguf(w, quiet=True)
