"""Oracle speed at a real model shape on one GPU: an 8B Llama-style target with an EAGLE3 head,
random weights, bf16, a batch of prompts — the greedy oracle beside a plain greedy decode of
the same target on the same batch, in the same process.

- plain decode: transformers' ``generate`` (greedy, exactly ``--new-tokens`` tokens, no EOS);
- oracle: ``oracle.heads.engine.greedy_traces``, the path ``specdoctor oracle --method eagle3``
  takes when greedy: one greedy decode of the target recording the three aux streams, then the
  head's k chain passes over the whole text, then the step walk. It decodes ``--new-tokens``
  tokens as well (max_tokens = new_tokens - k - 2, so both produce the same number).

Each is timed ``--repeats`` times, alternating, after one warm-up of each; the ratio is taken
per repeat (oracle time / plain time) and reported as min/median/max.

    python benchmarks/oracle_gpu.py [--batch 32] [--prompt-len 128] [--new-tokens 256]
                                    [--k 3] [--repeats 3] [--out FILE]

Random weights make the drafts wrong almost everywhere, so every step drafts k and accepts
~0: the most steps a request can have, the worst case for the walk.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

TARGET = {  # Llama-3.1-8B's shape
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-5, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192},
}
HEAD = {  # an EAGLE3 head for it, as published heads for Llama-3.1-8B are shaped
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 1, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-5, "vocab_size": 128256,
    "draft_vocab_size": 32000, "target_hidden_size": 4096,
    "max_position_embeddings": 131072, "rope_parameters": TARGET["rope_parameters"],
}


def tiny(cfg: dict[str, object]) -> dict[str, object]:
    """The same config at a CPU smoke-test size (``--tiny``)."""
    return {**cfg, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 4096,
            "target_hidden_size": 256,
            **({"num_hidden_layers": 8} if cfg["num_hidden_layers"] != 1 else {}),
            **({"draft_vocab_size": 1024} if "draft_vocab_size" in cfg else {})}


def head_tensors(head: dict[str, object], device: str, dtype: object, seed: int
                 ) -> dict[str, object]:
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    h, inter = int(head["hidden_size"]), int(head["intermediate_size"])  # type: ignore[call-overload]
    q = int(head["num_attention_heads"]) * int(head["head_dim"])  # type: ignore[call-overload]
    kv = int(head["num_key_value_heads"]) * int(head["head_dim"])  # type: ignore[call-overload]
    dv, v = int(head["draft_vocab_size"]), int(head["vocab_size"])  # type: ignore[call-overload]

    def rnd(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device) * 0.02).to(dtype)

    t = {"midlayer.self_attn.q_proj.weight": rnd(q, 2 * h),
         "midlayer.self_attn.k_proj.weight": rnd(kv, 2 * h),
         "midlayer.self_attn.v_proj.weight": rnd(kv, 2 * h),
         "midlayer.self_attn.o_proj.weight": rnd(h, q),
         "midlayer.mlp.gate_proj.weight": rnd(inter, h),
         "midlayer.mlp.up_proj.weight": rnd(inter, h),
         "midlayer.mlp.down_proj.weight": rnd(h, inter), "fc.weight": rnd(h, 3 * h),
         "lm_head.weight": rnd(dv, h)}
    for n in ("midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
              "midlayer.post_attention_layernorm.weight", "norm.weight"):
        t[n] = torch.ones(h, device=device, dtype=dtype)
    vocab = torch.randperm(v, generator=torch.Generator().manual_seed(seed))[:dv]
    t["d2t"] = (vocab.sort().values - torch.arange(dv)).to(device)
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/oracle_gpu.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a CPU smoke test of the script")
    a = ap.parse_args()
    target_cfg, head_cfg = (tiny(TARGET), tiny(HEAD)) if a.tiny else (TARGET, HEAD)

    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    from specdoctor.oracle.heads import eagle3
    from specdoctor.oracle.heads.engine import greedy_traces
    from specdoctor.oracle.heads.target import StreamTarget

    dev, dtype = a.device, torch.bfloat16 if a.device.startswith("cuda") else torch.float32
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in target_cfg.items() if k not in ("architectures",)})
    with torch.device(dev):
        torch.set_default_dtype(dtype)
        model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa")
        torch.set_default_dtype(torch.float32)
    model.eval()
    emb, lm = model.get_input_embeddings().weight, model.lm_head.weight
    head = eagle3.build(head_cfg, head_tensors(head_cfg, dev, dtype, 0), target_cfg,
                        lambda n: {"model.embed_tokens.weight": emb, "lm_head.weight": lm}[n])
    head = head.to(dev, dtype)
    build_s = time.perf_counter() - t0
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(3, int(target_cfg["vocab_size"]), (a.batch, a.prompt_len), generator=g).tolist()
    max_tokens = a.new_tokens - a.k - 2
    ids = torch.tensor(prompts, device=dev)

    def plain() -> float:
        sync()
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 do_sample=False, max_new_tokens=a.new_tokens,
                                 min_new_tokens=a.new_tokens, eos_token_id=None,
                                 pad_token_id=0)
        sync()
        assert out.shape[1] == a.prompt_len + a.new_tokens
        return time.perf_counter() - t

    def oracle() -> tuple[float, list[object]]:
        sync()
        t = time.perf_counter()
        traces = greedy_traces(StreamTarget(model, head.aux_ids), head, prompts, a.k,
                               max_tokens, dev, batch=a.batch)
        sync()
        return time.perf_counter() - t, traces

    plain()
    oracle()
    rows = []
    for _ in range(a.repeats):
        p = plain()
        o, traces = oracle()
        rows.append({"plain_s": round(p, 3), "oracle_s": round(o, 3), "ratio": round(o / p, 3),
                     "plain_tok_s": round(a.batch * a.new_tokens / p, 1),
                     "oracle_tok_s": round(a.batch * a.new_tokens / o, 1)})
        print(rows[-1], file=sys.stderr, flush=True)
    steps = sum(len(t.steps) for t in traces)
    accepted = sum(s.accepted for t in traces for s in t.steps)

    def mmm(key: str) -> dict[str, float]:
        xs = [r[key] for r in rows]
        return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}

    commit = os.environ.get("SPECDOCTOR_COMMIT")
    try:
        commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                       capture_output=True, text=True).stdout.strip() or None
    except OSError:
        pass
    out = {
        "what": "greedy EAGLE3 oracle vs plain greedy decode (transformers generate), same "
                "8B Llama-shaped target, same batch, random bf16 weights, one GPU",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "commit": commit,
        "device": torch.cuda.get_device_name(0) if dev.startswith("cuda") else "cpu",
        "shape": "tiny (smoke test)" if a.tiny else "Llama-3.1-8B", "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "batch": a.batch, "prompt_len": a.prompt_len, "new_tokens": a.new_tokens, "k": a.k,
        "max_tokens": max_tokens, "repeats": a.repeats, "build_s": round(build_s, 1),
        "oracle_steps": steps, "oracle_accepted_tokens": accepted,
        "runs": rows, "ratio": mmm("ratio"), "plain_tok_s": mmm("plain_tok_s"),
        "oracle_tok_s": mmm("oracle_tok_s"), "target_ratio": 1.5,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("ratio", "plain_tok_s", "oracle_tok_s")}))


if __name__ == "__main__":
    main()
