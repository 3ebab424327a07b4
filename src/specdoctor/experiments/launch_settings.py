"""The speculative setup a launch command describes: target, method, k, drafter, tokenizer,
prompt lookup, dtype and the speculative config's other keys, read through the command's engine
adapter (``launch.engines``). Below every experiment and the interface they answer through
(``base.Context`` holds one); it imports no experiment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.launch import LaunchSpec
from specdoctor.launch.engines import Speculation
from specdoctor.methods import NO_DRAFT_DIR


@dataclass(frozen=True)
class Settings:
    """The speculative setup a launch command describes (or, for a server that cannot be
    restarted, what the user and the server tell: ``diagnose.served``)."""

    target: Path | None
    method: str | None
    k: int | None
    draft: Path | None
    tokenizer: Path | None
    prompt_lookup: tuple[int, int]
    dtype: str | None
    max_model_len: int | None
    draft_sample_method: str
    # the speculative config's other keys, verbatim (use_heterogeneous_vocab, ...)
    options: Mapping[str, Any] = field(default_factory=dict)


# Where each engine's command names the target model (vLLM also takes it after ``serve``).
MODEL_FLAGS = {"sglang": ("--model-path",), "llamacpp": ("-m", "--model")}


def settings(launch: LaunchSpec) -> Settings:
    """What the command serves, read through its engine's own adapter (an unrecognised command:
    its model arguments only)."""
    spec = launch.speculation if launch.engine != "unknown" else None
    model = launch.arg(*MODEL_FLAGS.get(launch.engine, ("--model",)))
    if model is None:  # `vllm serve MODEL`: the positional after "serve"
        argv = list(launch.argv)
        if "serve" in argv and argv.index("serve") + 1 < len(argv):
            model = argv[argv.index("serve") + 1]
    mml = launch.arg("--max-model-len")
    return settings_of(spec, Path(model) if model else None, launch.arg("--tokenizer"),
                       launch.arg("--dtype"), int(mml) if mml and mml.isdigit() else None)


def settings_of(spec: Speculation | None, target: Path | None, tokenizer: str | Path | None,
                dtype: str | None, max_model_len: int | None) -> Settings:
    """The settings of a speculation and the target's serving arguments, however they were
    learnt (a command, a start-up log, the user's flags)."""
    opts = dict(spec.options) if spec is not None else {}
    method = spec.method if spec is not None else None
    own_dir = method is not None and method not in NO_DRAFT_DIR
    drafter = spec.drafter if spec is not None and own_dir else None
    return Settings(
        target=target, method=method,
        k=spec.k if spec is not None and spec.k else None,
        draft=Path(drafter) if drafter else None,
        tokenizer=Path(tokenizer) if tokenizer else None,
        prompt_lookup=(int(opts.get("prompt_lookup_min") or 2),
                       int(opts.get("prompt_lookup_max") or 4)),
        dtype=dtype, max_model_len=max_model_len,
        draft_sample_method=str(opts.get("draft_sample_method") or "greedy"),
        options=opts)
