"""One ``oracle`` command as a library call: settings merged with a recorded run, the oracle
run, the comparison and its notes, and the JSON the command prints and stores. The command reads
the store and the prompt suites and hands over what they hold (the recorded run, the prompts).

``Asked`` holds what the user gave (None: not given). ``settings`` resolves each field once:
what was asked, else what the recorded run ran (``--compare``), else ``OracleConfig``'s own
default — the one source of defaults, which the command's help shows too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.oracle.compare import MeasuredRun
from specdoctor.oracle.runner import OracleConfig, OracleResult
from specdoctor.oracle.simulate import LLAMACPP_ROOM, Sampling

DEFAULTS = {f.name: f.default for f in fields(OracleConfig) if f.default is not MISSING}


def default(name: str) -> Any:
    """``OracleConfig``'s default for a field (what the command shows as its default)."""
    return DEFAULTS[name]


@dataclass(frozen=True)
class Asked:
    target: Path | None = None
    draft: Path | None = None
    method: str | None = None
    k: int | None = None
    suite: str = "code"
    num_prompts: int = 16
    max_tokens: int | None = None
    sampling: str | None = None
    draft_sampling: str | None = None
    samples: int | None = None
    seed: int | None = None
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    max_model_len: int | None = None
    device: str | None = None
    dtype: str | None = None
    threads: int | None = None
    vocab_map: Path | None = None
    tokenizer: Path | None = None
    batch: int | None = None
    draft_p_min: float | None = None
    draft_n_min: int | None = None


def parse_sampling(text: str) -> tuple[float, float]:
    """``greedy`` → (0, 1); ``T`` or ``T,top_p`` → floats."""
    if text.strip().lower() == "greedy":
        return 0.0, 1.0
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise InputError(f"--sampling {text!r} is neither 'greedy' nor 'T,top_p'",
                         "e.g. --sampling greedy or --sampling 1.0,0.95")
    return parts[0], parts[1] if len(parts) == 2 else 1.0


def _first(*values: Any) -> Any:
    for v in values:
        if v is not None:
            return v
    return None


def settings(asked: Asked, measured: Any | None = None,
             prompts: Sequence[str] = ()) -> OracleConfig:
    """The oracle's configuration: asked, else recorded (``measured``), else the default. The
    prompts are the recorded run's, else ``prompts`` (the asked suite's, which the caller takes).
    """
    srv: dict[str, Any] = measured.server_settings() if measured else {}
    mparams: dict[str, Any] = measured.params if measured else {}
    target = _first(asked.target, Path(srv["target"]) if srv.get("target") else None)
    if target is None:
        raise InputError("no target model", "pass --target DIR (the server's --model directory)")
    method = _first(asked.method, srv.get("method"), "draft_model" if asked.draft else None)
    if method is None:
        raise InputError("no drafter", "pass --draft DIR, or --method ngram|mtp")
    draft = asked.draft
    if draft is None and srv.get("draft") and method == srv.get("method"):
        draft = Path(srv["draft"])
    if asked.sampling is not None or measured is None:
        temperature, top_p = parse_sampling(asked.sampling or "greedy")
    else:
        temperature = float(mparams.get("temperature", 0.0))
        top_p = float(mparams.get("top_p", 1.0))
    engine_draft = {"greedy": "argmax"}.get(str(srv.get("draft_sample_method")),
                                            srv.get("draft_sample_method"))
    prompts = tuple(measured.prompts) if measured else tuple(prompts)

    def num(name: str, recorded: Any) -> Any:
        return _first(getattr(asked, name), None if recorded is None else int(recorded),
                      default(name))

    tokenizer = _first(asked.tokenizer, Path(srv["tokenizer"]) if srv.get("tokenizer") else None)
    return OracleConfig(
        target=Path(target), prompts=prompts, method=method, draft=draft,
        k=num("k", srv.get("k")), max_tokens=num("max_tokens", mparams.get("max_tokens")),
        sampling=Sampling(temperature, top_p,
                          _first(asked.draft_sampling, engine_draft, "argmax")),
        samples=num("samples", None), seed=num("seed", None),
        prompt_lookup_min=num("prompt_lookup_min", srv.get("prompt_lookup_min")),
        prompt_lookup_max=num("prompt_lookup_max", srv.get("prompt_lookup_max")),
        max_model_len=_first(asked.max_model_len,
                             int(srv["max_model_len"]) if srv.get("max_model_len") else None),
        device=_first(asked.device, default("device")), dtype=_first(asked.dtype,
                                                                       default("dtype")),
        vocab_map=asked.vocab_map, threads=asked.threads, tokenizer=tokenizer,
        batch=num("batch", None), ignore_eos=bool(mparams.get("ignore_eos", True)),
        draft_p_min=_first(asked.draft_p_min, 0.0), draft_n_min=_first(asked.draft_n_min, 0),
        # a llama-server run drafts only where the request has room (simulate.LLAMACPP_ROOM)
        draft_room=LLAMACPP_ROOM if _engine(measured) == "llamacpp" else None)


def _engine(measured: MeasuredRun | None) -> str | None:
    """The engine of a recorded run's launch (None: no launch recorded, or unreadable)."""
    if measured is None or not measured.launch_spec:
        return None
    from specdoctor.launch import LaunchSpec

    try:
        return LaunchSpec.from_json(measured.launch_spec).engine
    except (KeyError, TypeError, ValueError):
        return None


def comparison_notes(config: OracleConfig, measured: Any) -> list[str]:
    """What a reader must know to read the gap: precision, shared seeds, greedy exactness."""
    srv, mparams = measured.server_settings(), measured.params
    notes = []
    if srv.get("dtype") and srv["dtype"] not in (config.dtype, "auto"):
        notes.append(
            f"the server ran in {srv['dtype']}, the oracle in {config.dtype}: near-ties flip "
            f"between precisions (about 1% of positions on the lab models) and greedy "
            f"trajectories part there; pass --dtype {srv['dtype']} to compare like with like")
    if (not config.sampling.greedy and mparams.get("seed") is not None
            and not mparams.get("seed_per_request")):
        notes.append(
            f"the measured requests all carried seed {mparams['seed']}: they share one random "
            f"stream, so they are not independent units and the measured interval is too "
            f"narrow; measure again (measure now seeds each request on its own)")
    if config.sampling.greedy:
        notes.append("greedy: the oracle is deterministic; any significant gap is the "
                     "engine's (or a near-tie flip: see docs/oracle.md)")
    return notes


@dataclass
class Outcome:
    result: OracleResult
    comparison: Any | None
    out: dict[str, Any]


def run(asked: Asked, measured: MeasuredRun | None = None, prompts: Sequence[str] = (),
        near_ties: bool = False, on_start: Callable[[OracleConfig], None] | None = None,
        on_request: Callable[[int, int], None] | None = None) -> Outcome:
    """Resolve the settings, run the oracle, compare with the recorded run ``measured`` when
    given (else run on ``prompts``); the JSON of the command (not stored: ``record`` is the
    caller's)."""
    from specdoctor.oracle import compare as cmp
    from specdoctor.oracle.runner import run_oracle

    config = settings(asked, measured, prompts)
    if on_start:
        on_start(config)
    result = run_oracle(config, on_request=on_request)
    out: dict[str, Any] = result.to_json()
    srv = measured.server_settings() if measured else {}
    engine_draft = {"greedy": "argmax"}.get(str(srv.get("draft_sample_method")),
                                            srv.get("draft_sample_method"))
    if engine_draft and not config.sampling.greedy:
        out["engine_draft_sampling"] = engine_draft
    if near_ties:
        from specdoctor.oracle.numerics import near_ties as flips

        out["numerics"] = [r.to_json() for r in flips(result)]
    comparison = None
    if measured is not None:
        if measured.units.shape[0] != len(config.prompts):
            raise InputError("the run's requests and prompts differ in number", "measure again")
        comparison = cmp.compare_units(result.prompt_units(), measured.units)
        comparison.notes.extend(comparison_notes(config, measured))
        out["compare"] = {"run_id": measured.run_id, **comparison.to_json()}
    return Outcome(result, comparison, out)


def stored_requests(result: OracleResult) -> list[dict[str, Any]]:
    """The oracle's requests in the store's shape (one per trajectory)."""
    config = result.config
    reqs = []
    for i, t in enumerate(result.traces):
        d, dt, acc, per = t.counts(config.k)
        reqs.append({"index": i, "prompt": config.prompts[t.prompt_index],
                     "completion_tokens": len(t.output_ids), "latency_s": 0.0,
                     "profile": {"drafts": d, "draft_tokens": dt, "accepted_tokens": acc,
                                 "accepted_per_position": per, "k": config.k},
                     "per_step": [[s.accepted for s in t.steps], [s.drafted for s in t.steps]]})
    return reqs
