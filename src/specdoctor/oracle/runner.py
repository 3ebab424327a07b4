"""``run_oracle``: the acceptance a correct engine reaches with these weights on these prompts.

Library entry point for the ``oracle`` command and for the diagnosis, where it is the experiment
that separates a weak drafter (oracle low too) from an engine that loses acceptance (measured
well below the oracle).

Cost: the target runs once per step over the new tokens plus the drafts, the drafter k times
per step (sampled drafts: the target k + 1 times). For the lab models (2-layer target,
1-layer drafter, fp32, CPU) 16 prompts x 64 tokens take well under a CPU-minute (see
benchmarks/results/oracle_speed.txt); ``estimate_seconds`` gives the figure before running.
The cost grows with parameters x tokens like any forward pass; on a GPU a model that fits is
limited by per-step overhead, not by the arithmetic.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.acceptance.bootstrap import with_bootstrap
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.errors import InputError
from specdoctor.methods import NO_DRAFT_DIR
from specdoctor.textfile import MAX_CONFIG, read_limited
from specdoctor.oracle import stats
from specdoctor.oracle.models import (
    CachedLM, VocabMap, check_fits, check_vocab, load_model, load_tokenizer, param_count,
    pick_device,
)
from specdoctor.oracle.simulate import (
    DRAFT_MODES, ConfidenceStop, ModelDrafter, NgramDrafter, RequestTrace, Sampling, run_request,
)
from specdoctor.served_files import read_config

log = logging.getLogger(__name__)

HEAD_METHODS = ("eagle3", "mtp", "dflash")  # drafters that read the target's hidden states
METHODS = ("draft_model", "ngram", *HEAD_METHODS)
LABEL = "oracle"
# Seconds per forward pass of a lab-size model on CPU (HF eager, batch 1, a few tokens: 3.4 ms
# in benchmarks/oracle_speed.py on 2 cores), and the arithmetic rate on top of it.
FORWARD_OVERHEAD_S = 0.0035
CPU_FLOPS = 2.0e10
# Bounds past which a run cannot end in any reasonable time or fit in memory, refused before
# anything is loaded: k (vLLM serves at most a few dozen), tokens per request (with the
# context, as --max-model-len), sampled trajectories, a batch, CPU threads, seeds (torch's).
MAX_K = 64
MAX_TOKENS = 1 << 17
MAX_SAMPLES = 10_000
MAX_BATCH = 1024
MAX_THREADS = 1024
MAX_SEED = 2 ** 32 - 1


@dataclass(frozen=True)
class OracleConfig:
    target: Path
    prompts: tuple[str, ...]
    method: str = "draft_model"
    draft: Path | None = None
    k: int = 4
    max_tokens: int = 64
    sampling: Sampling = field(default_factory=Sampling)
    samples: int = 1
    seed: int = 0
    prompt_lookup_min: int = 2
    prompt_lookup_max: int = 4
    max_model_len: int | None = None
    device: str = "auto"
    dtype: str = "float32"
    vocab_map: Path | None = None
    ignore_eos: bool = True
    threads: int | None = None  # CPU threads; None: 1 for small models (see cpu_threads)
    tokenizer: Path | None = None  # the server's --tokenizer, when it is not the target's
    batch: int = 1  # greedy hidden-state drafters: equal-length prompts decoded together
    # llama.cpp's drafting policy (draft models): stop at a draft token whose probability is
    # under draft_p_min; drop a draft shorter than draft_n_min (simulate.ConfidenceStop)
    draft_p_min: float = 0.0
    draft_n_min: int = 0
    # drafts stop this many tokens short of the request's end (llama-server: 1,
    # simulate.LLAMACPP_ROOM); None drafts all k to the end, as vLLM does
    draft_room: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": str(self.target), "method": self.method,
            "draft": None if self.draft is None else str(self.draft), "k": self.k,
            "max_tokens": self.max_tokens, "num_prompts": len(self.prompts),
            "sampling": self.sampling.label(), "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p, "draft_sampling": self.sampling.draft,
            "samples": self.samples, "seed": self.seed,
            "prompt_lookup": [self.prompt_lookup_min, self.prompt_lookup_max],
            "max_model_len": self.max_model_len, "device": self.device, "dtype": self.dtype,
            "vocab_map": None if self.vocab_map is None else str(self.vocab_map),
            "ignore_eos": self.ignore_eos, "threads": self.threads,
            "tokenizer": None if self.tokenizer is None else str(self.tokenizer),
            "batch": self.batch, "draft_p_min": self.draft_p_min,
            "draft_n_min": self.draft_n_min, "draft_room": self.draft_room,
        }


@dataclass
class OracleCost:
    wall_s: float
    cpu_s: float
    output_tokens: int
    target_forwards: int
    draft_forwards: int
    device: str
    dtype: str
    load_s: float = 0.0
    threads: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 3), "cpu_s": round(self.cpu_s, 3),
                "load_s": round(self.load_s, 3), "output_tokens": self.output_tokens,
                "tokens_per_s": round(self.tokens_per_s, 2),
                "target_forwards": self.target_forwards, "draft_forwards": self.draft_forwards,
                "device": self.device, "dtype": self.dtype, "threads": self.threads,
                "implementation": "transformers, eager attention"}


@dataclass
class OracleResult:
    config: OracleConfig
    profile: AcceptanceProfile          # realized counts of the simulated engine (int)
    expected: list[stats.RatioCI]       # expected unconditional per-position rates
    expected_accepted_per_draft: stats.RatioCI
    traces: list[RequestTrace]
    cost: OracleCost
    notes: list[str] = field(default_factory=list)

    def prompt_units(self) -> np.ndarray:
        """Per prompt (summed over samples): drafts, expected accepted at each position."""
        k = self.config.k
        units = np.zeros((len(self.config.prompts), k + 1))
        for t in self.traces:
            units[t.prompt_index, 0] += len(t.steps)
            units[t.prompt_index, 1:] += t.expected_per_position(k)
        return units

    def to_json(self) -> dict[str, Any]:
        return {
            "label": LABEL,
            "config": self.config.to_json(),
            "total": self.profile.to_json(),
            "expected_per_position": [c.to_json() for c in self.expected],
            "expected_accepted_per_draft": self.expected_accepted_per_draft.to_json(),
            "expected_convention": "unconditional per-position rates, [value, ci95 low, high]; "
                                   "expected over the verifier's randomness (equal to the "
                                   "realized counts when greedy)",
            "cost": self.cost.to_json(),
            "requests": [{"prompt_index": t.prompt_index, "sample": t.sample_index,
                          "output_ids": t.output_ids,
                          "per_step_accepted": [s.accepted for s in t.steps],
                          "per_step_drafted": [s.drafted for s in t.steps]}
                         for t in self.traces],
            "notes": self.notes,
        }


def estimate_seconds(config: OracleConfig) -> float:
    """Rough CPU seconds of the simulation, before loading anything: forwards x (overhead +
    arithmetic), counting one step per output token. Steps emit 1 + accepted tokens, so this
    is an upper bound (about 2.5x the lab's measured cost at its acceptance)."""
    steps = len(config.prompts) * config.samples * config.max_tokens
    tp = param_count(config.target)
    dp = param_count(config.draft) if config.draft is not None else 0
    ctx = 64 + config.max_tokens
    draft_calls = steps * config.k if config.draft is not None else 0
    target_calls = steps * (config.k + 1 if config.sampling.draft == "probabilistic" else 1)
    return (target_calls * (FORWARD_OVERHEAD_S + 2 * tp * (config.k + 1) / CPU_FLOPS)
            + draft_calls * (FORWARD_OVERHEAD_S + 2 * dp / CPU_FLOPS)
            + len(config.prompts) * 2 * (tp + dp) * ctx / CPU_FLOPS)


def validate(config: OracleConfig) -> None:
    if config.method not in METHODS:
        raise InputError(f"unknown method {config.method!r}",
                         f"choose one of: {', '.join(METHODS)}")
    if config.method in ("draft_model", "eagle3", "dflash") and config.draft is None:
        raise InputError(f"the {config.method} oracle needs the drafter",
                         "pass --draft DIR, or --method ngram")
    if config.method in NO_DRAFT_DIR and config.draft is not None:
        raise InputError(f"--method {config.method} takes no --draft",
                         "drop --draft" + (" (the MTP layers are in the target checkpoint)"
                                           if config.method == "mtp" else ""))
    if config.method in HEAD_METHODS:
        if not config.sampling.greedy and config.sampling.draft != "argmax":
            raise InputError(f"{config.method} drafts by argmax in the oracle",
                             "use --draft-sampling argmax (vLLM's default for these drafters)")
        if not config.ignore_eos:
            raise InputError(f"the {config.method} oracle runs requests to max_tokens, "
                             "ignoring EOS (as measure sends them)", "measure with ignore_eos")
    if config.k < 1 or config.max_tokens < 1 or config.samples < 1 or not config.prompts:
        raise InputError("--k, --max-tokens, --samples and the prompt count must be at least 1",
                         "e.g. --k 4 --max-tokens 64")
    for flag, value, most, e_g in (
            ("--k", config.k, MAX_K, 4), ("--max-tokens", config.max_tokens, MAX_TOKENS, 64),
            ("--samples", config.samples, MAX_SAMPLES, 4), ("--batch", config.batch, MAX_BATCH, 8),
            ("--threads", config.threads or 1, MAX_THREADS, 1),
            ("--prompt-lookup-min", config.prompt_lookup_min, MAX_K, 2),
            ("--prompt-lookup-max", config.prompt_lookup_max, MAX_K, 4),
            ("--max-model-len", config.max_model_len or 1, MAX_TOKENS, 2048)):
        if not 1 <= value <= most:  # past these the run would never end, or not fit
            raise InputError(f"{flag} {value}: must be from 1 to {most:,}", f"e.g. {flag} {e_g}")
    if config.prompt_lookup_min > config.prompt_lookup_max:
        raise InputError(f"--prompt-lookup-min {config.prompt_lookup_min} is above "
                         f"--prompt-lookup-max {config.prompt_lookup_max}", "e.g. 2 and 4")
    if not 0 <= config.seed <= MAX_SEED:
        raise InputError(f"--seed {config.seed}: must be from 0 to {MAX_SEED}", "e.g. --seed 0")
    if config.sampling.draft not in DRAFT_MODES:
        raise InputError(f"unknown draft sampling {config.sampling.draft!r}",
                         f"choose one of: {', '.join(DRAFT_MODES)}")
    if not (0.0 < config.sampling.top_p <= 1.0) or config.sampling.temperature < 0:
        raise InputError("temperature must be >= 0 and top_p in (0, 1]", "e.g. --sampling 1.0,0.95")
    if config.dtype not in ("float32", "bfloat16", "float16"):
        raise InputError(f"unknown dtype {config.dtype!r}", "choose float32, bfloat16 or float16")
    if not 0.0 <= config.draft_p_min <= 1.0 or not 0 <= config.draft_n_min <= MAX_K:
        raise InputError(f"--draft-p-min {config.draft_p_min} / --draft-n-min "
                         f"{config.draft_n_min}: the probability must be from 0 to 1 and the "
                         f"length from 0 to {MAX_K}", "e.g. --draft-p-min 0.75 --draft-n-min 0")
    if (config.draft_p_min or config.draft_n_min) and (config.draft is None
                                                       or config.method in HEAD_METHODS):
        raise InputError("--draft-p-min and --draft-n-min are llama.cpp's policy for a draft "
                         f"model; --method {config.method} has none",
                         "drop them, or oracle a draft model (--draft)")


DEVICE = re.compile(r"auto|cpu|mps|cuda(?::\d{1,4})?")


def check_inputs(config: OracleConfig) -> None:
    """What ``validate`` cannot see in the settings alone, checked before anything loads: the
    device named as torch names one, each model's config.json free of NaN and Infinity (figures
    computed from such a model would be printed as if they meant something), and the tokens
    asked for within the target's context (``max_position_embeddings``, or --max-model-len)."""
    if not DEVICE.fullmatch(config.device):
        raise InputError(f"--device {config.device!r} is not a device",
                         "pass auto, cpu, cuda or cuda:N")
    if config.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InputError(f"--device {config.device}: no CUDA device is visible here",
                             "pass --device cpu (or auto)")
    target_cfg: dict[str, Any] = {}
    for d in [config.target] + ([config.draft] if config.draft is not None else []):
        cfg = finite_config(d)
        if d == config.target:
            target_cfg = cfg
    limit = config.max_model_len or target_cfg.get("max_position_embeddings")
    if type(limit) is int and limit > 0 and config.max_tokens >= limit:
        raise InputError(f"--max-tokens {config.max_tokens:,}: past the target's context of "
                         f"{limit:,} tokens ({'--max-model-len' if config.max_model_len else 'max_position_embeddings'}"
                         " in its config.json), prompt not counted",
                         f"ask for fewer tokens, e.g. --max-tokens {min(64, limit // 2)}")


def finite_config(model_dir: Path) -> dict[str, Any]:
    """``model_dir/config.json``, refused when it holds NaN or ±Infinity anywhere."""
    path = model_dir / "config.json"
    if not path.is_file():
        return {}  # the loaders name a missing config.json

    def refuse(word: str) -> Any:
        raise InputError(f"{path} holds {word}, which no model config has",
                         "fix the config.json (a number, not NaN or Infinity)")

    try:
        cfg = json.loads(read_limited(path, "model config", MAX_CONFIG), parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"cannot read {path} as JSON: {exc}", "check the model's config.json") from exc
    if not isinstance(cfg, dict):
        raise InputError(f"{path} is not a JSON object", "check the model directory")
    return cfg


def run_oracle(config: OracleConfig,
               on_request: Callable[[int, int], None] | None = None) -> OracleResult:
    """Simulate every prompt (``samples`` trajectories each) and aggregate like ``measure``."""
    validate(config)
    check_inputs(config)
    vocab_map = VocabMap.load(config.vocab_map) if config.vocab_map else None
    if config.draft is not None and config.method not in HEAD_METHODS:
        check_vocab(config.target, config.draft, vocab_map)
    device = pick_device(config.device)
    dirs = [config.target] + ([config.draft] if config.draft is not None else [])
    check_fits(dirs, device, config.dtype)

    threads = cpu_threads(config, sum(param_count(d) for d in dirs))
    with torch_threads(device, threads):
        return _run(config, device, vocab_map, threads, on_request)


@contextmanager
def torch_threads(device: str, n: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``n`` for the block when it runs on the CPU (None: as they
    are), and put back after."""
    import torch

    before = torch.get_num_threads()
    if device == "cpu" and n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# Below this many parameters a forward pass is dominated by per-op overhead, and a second
# thread only adds synchronisation (on a shared 2-core machine it made each pass 11-31x slower:
# benchmarks/results/threads.json).
SMALL_MODEL_PARAMS = 100_000_000


def cpu_threads(config: OracleConfig, params: int) -> int:
    import os

    if config.threads:
        return config.threads
    return 1 if params < SMALL_MODEL_PARAMS else max(1, os.cpu_count() or 1)


def _run(config: OracleConfig, device: str, vocab_map: VocabMap | None, threads: int,
         on_request: Callable[[int, int], None] | None) -> OracleResult:
    import torch

    if config.method in HEAD_METHODS:
        return _run_head(config, device, threads, on_request)
    t_load = time.perf_counter()
    tok = load_tokenizer(config.tokenizer or config.target)  # the server's --tokenizer, as heads
    target = CachedLM(load_model(config.target, device, config.dtype), device)
    tcfg = read_config(config.target)
    target_vocab = int(tcfg["vocab_size"])
    max_model_len = config.max_model_len or tcfg.get("max_position_embeddings")
    drafter: ModelDrafter | NgramDrafter
    if config.draft is not None:
        drafter = ModelDrafter(CachedLM(load_model(config.draft, device, config.dtype), device),
                               target_vocab, vocab_map,
                               ConfidenceStop(config.draft_p_min, config.draft_n_min))
    else:
        drafter = NgramDrafter(config.prompt_lookup_min, config.prompt_lookup_max, max_model_len)
    load_s = time.perf_counter() - t_load

    eos = None if config.ignore_eos else tok.eos_token_id
    traces: list[RequestTrace] = []
    total = len(config.prompts) * config.samples
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for i, prompt in enumerate(config.prompts):
            ids = list(tok(prompt)["input_ids"])  # add_special_tokens=True, as vLLM encodes
            for j in range(config.samples):
                rng = np.random.default_rng([config.seed, i, j])
                traces.append(run_request(ids, target, drafter, config.k, config.max_tokens,
                                          config.sampling, rng, i, j, eos, config.draft_room))
                if on_request:
                    on_request(len(traces), total)
    cost = OracleCost(
        wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0,
        output_tokens=sum(len(t.output_ids) for t in traces),
        target_forwards=target.forwards,
        draft_forwards=drafter.lm.forwards if isinstance(drafter, ModelDrafter) else 0,
        device=device, dtype=config.dtype, load_s=load_s,
        threads=threads if device == "cpu" else 0)
    return _result(config, traces, cost)


def _run_head(config: OracleConfig, device: str, threads: int,
              on_request: Callable[[int, int], None] | None) -> OracleResult:
    """EAGLE3, MTP, DFlash: greedy by one recorded target decode, sampled step by step."""
    import torch

    from specdoctor.oracle import heads
    from specdoctor.oracle.heads.engine import HeadDrafter, greedy_traces
    from specdoctor.oracle.heads.target import StreamTarget

    t_load = time.perf_counter()
    head = heads.load(config.method, config.target, config.draft)
    tok = load_tokenizer(config.tokenizer or config.target)
    model = load_model(config.target, device, config.dtype)
    head = head.to(device, getattr(torch, config.dtype))
    target = StreamTarget(model, head.aux_ids)
    load_s = time.perf_counter() - t_load
    notes = []
    if head.block_size is not None and config.k + 1 > int(head.block_size):
        notes.append(f"k={config.k} asks blocks of {config.k + 1}, longer than the drafter's "
                     f"block_size {head.block_size}")
    prompts = [list(tok(p)["input_ids"]) for p in config.prompts]
    t0, c0 = time.perf_counter(), time.process_time()
    drafter_forwards = 0
    if config.sampling.greedy:
        traces = greedy_traces(target, head, prompts, config.k, config.max_tokens, device,
                               batch=config.batch)
        drafter_forwards = config.k * len(prompts)
        if on_request:
            on_request(len(traces), len(traces))
    else:
        cached = CachedLM(model, device)
        drafter = HeadDrafter(target, head, device)
        traces = []
        total = len(prompts) * config.samples
        with torch.inference_mode():
            for i, ids in enumerate(prompts):
                for j in range(config.samples):
                    rng = np.random.default_rng([config.seed, i, j])
                    traces.append(run_request(ids, cached, drafter, config.k,
                                              config.max_tokens, config.sampling, rng, i, j))
                    if on_request:
                        on_request(len(traces), total)
        drafter_forwards = drafter.forwards
        target.forwards += cached.forwards
    cost = OracleCost(
        wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0,
        output_tokens=sum(len(t.output_ids) for t in traces), target_forwards=target.forwards,
        draft_forwards=drafter_forwards, device=device, dtype=config.dtype, load_s=load_s,
        threads=threads if device == "cpu" else 0)
    result = _result(config, traces, cost)
    result.notes.extend(notes)
    return result


def _result(config: OracleConfig, traces: Sequence[RequestTrace], cost: OracleCost
            ) -> OracleResult:
    k = config.k
    units = []
    for t in traces:
        d, dt, acc, per = t.counts(k)
        units.append(AcceptanceProfile(d, dt, acc, tuple(per), k))
    profile = sum_profiles(units)
    note = (f"{LABEL}: {config.sampling.label()}; {config.method}"
            + (f" {config.draft.name}" if config.draft else "")
            + f" vs target {config.target.name}, k={k}, computed outside the engine")
    profile = AcceptanceProfile(profile.drafts, profile.draft_tokens, profile.accepted_tokens,
                                profile.accepted_per_position, k, notes=(note,))
    # Intervals over prompts (samples of one prompt are one unit), like measure's per request.
    per_prompt = [sum_profiles([u for u, t in zip(units, traces) if t.prompt_index == i])
                  for i in range(len(config.prompts))]
    profile = with_bootstrap(profile, per_prompt, "prompts")
    result = OracleResult(config, profile, [], stats.RatioCI(None, None, None), list(traces), cost)
    pu = result.prompt_units()
    with_total = np.column_stack([pu, pu[:, 1:].sum(axis=1)])
    cis = stats.position_rates(with_total)
    result.expected = cis[:k]
    result.expected_accepted_per_draft = cis[k]
    if config.sampling.greedy:
        result.notes.append("greedy: every step's outcome is determined, so expected and "
                            "realized counts are the same numbers")
    else:
        result.notes.append(
            f"sampling: per-position rates are expectations along {config.samples} sampled "
            f"trajectory(ies) per prompt (products of per-step acceptance probabilities); the "
            f"profile's counts are one realization of the engine's random acceptance")
    return result
