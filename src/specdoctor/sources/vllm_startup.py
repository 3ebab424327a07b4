"""The served setup a vLLM start-up log names: target, tokenizer, dtype, length, speculation.

vLLM 0.32 writes two start-up lines that name it (both seen in the lab's own logs,
tests/fixtures/vllm/lab-*/server.log):

- the API server's ``non-default args: {...}`` (vllm/entrypoints/serve/utils/api_utils.py,
  ``log_non_default_args``): the arguments the user gave, as a Python dict, the speculative
  config among them with every key the user set (``prompt_lookup_min``, ``draft_sample_method``,
  …); read with ``ast.literal_eval``, never evaluated;
- the engine core's ``Initializing a V1 LLM engine (vX) with config: model='…',
  speculative_config=SpeculativeConfig(method='…', model='…', num_spec_tokens=N),
  tokenizer='…', …, dtype=torch.float32, max_seq_len=N, …`` (vllm/v1/engine/core.py, with
  ``SpeculativeConfig.__repr__`` of vllm/config/speculative.py): the values as the engine
  resolved them (the tokenizer and the length filled in, the method after vLLM's renaming), but
  only method, drafter and k of the speculative config; ``speculative_config=None`` when
  speculation is off.

The engine's values win where both lines name one; the other speculative keys come from the
arguments. A log holding several server starts (a server restarted into the same file) gives
the last one: the server that runs now. Each value keeps the line it was read from.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specdoctor.launch.engines import speculation_of

ARGS_MARKER = "non-default args: "
ENGINE_MARKER = " with config: "
MARKERS = (ARGS_MARKER.encode(), ENGINE_MARKER.encode())
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_ENGINE_FIELDS = {
    "model": re.compile(r"with config: model=(" + _QUOTED + ")"),
    "tokenizer": re.compile(r", tokenizer=(" + _QUOTED + ")"),
    "dtype": re.compile(r", dtype=(?:torch\.)?(\w+)"),
    "max_model_len": re.compile(r", max_seq_len=(\d+)"),
}
_SPEC = re.compile(r"speculative_config=SpeculativeConfig\(method=(" + _QUOTED + r"|None), "
                   r"model=(" + _QUOTED + r"|None), num_spec_tokens=(\d+)\)")
_VERSION = re.compile(r"LLM engine \(v([\w.+-]+)\)")
# A line longer than this is not a start-up line vLLM wrote (its own are a few KiB at most).
MAX_LINE = 1 << 16


@dataclass
class StartupConfig:
    """One server start as its log names it. ``where`` maps each field that was read to the
    ``label:line`` it came from; ``options`` are the speculative config's other keys."""

    model: str | None = None
    tokenizer: str | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    method: str | None = None
    k: int | None = None
    draft: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    speculation_off: bool = False
    version: str | None = None
    where: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, at: str) -> None:
        if value is not None:
            setattr(self, name, value)
            self.where[name] = at


def args_of(line: str) -> dict[str, Any] | None:
    """The ``non-default args`` dict of a line (None when the line holds none, or not one
    that reads as a literal: a cut line, a repr of an object)."""
    at = line.find(ARGS_MARKER)
    if at < 0 or len(line) > MAX_LINE:
        return None
    try:
        value = ast.literal_eval(line[at + len(ARGS_MARKER):].strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def engine_config_of(line: str) -> dict[str, Any] | None:
    """The values an engine core's ``with config:`` line names (None: not such a line).
    ``speculative_config`` is None when the line says speculation is off, absent when the
    line does not say."""
    if ENGINE_MARKER not in line or "speculative_config=" not in line or len(line) > MAX_LINE:
        return None
    out: dict[str, Any] = {}
    for name, rx in _ENGINE_FIELDS.items():
        m = rx.search(line)
        if m is not None:
            out[name] = int(m.group(1)) if name == "max_model_len" else _unquote(m.group(1))
    if "speculative_config=None" in line:
        out["speculative_config"] = None
    else:
        m = _SPEC.search(line)
        if m is not None:
            out["speculative_config"] = {"method": _unquote(m.group(1)),
                                         "model": _unquote(m.group(2)),
                                         "num_speculative_tokens": int(m.group(3))}
    v = _VERSION.search(line)
    if v is not None:
        out["version"] = v.group(1)
    return out


def _unquote(token: str) -> Any:
    if token == "None" or not token or token[0] not in "'\"":
        return None if token == "None" else token
    try:
        return ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return token[1:-1]


def _speculative(value: Any) -> dict[str, Any] | None:
    """The speculative config as the arguments hold it: a dict, or JSON text (older vLLM)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def read_startup(lines: Iterable[tuple[int, str]], label: str) -> StartupConfig | None:
    """The last server start among ``(line number, line)`` pairs (any lines; only start-up
    lines are read), or None when the lines name none (a pure function)."""
    cfg: StartupConfig | None = None
    for lineno, line in lines:
        at = f"{label}:{lineno}"
        args = args_of(line) if ARGS_MARKER in line else None
        if args is not None:
            cfg = StartupConfig()  # a new start: what an earlier one said no longer holds
            _from_args(cfg, args, at)
            continue
        engine = engine_config_of(line)
        if engine is not None:
            if cfg is None or "engine" in cfg.where:  # an engine line with no arguments line
                cfg = StartupConfig()
            _from_engine(cfg, engine, at)
    return cfg


def _from_args(cfg: StartupConfig, args: dict[str, Any], at: str) -> None:
    model = args.get("model") if isinstance(args.get("model"), str) else args.get("model_tag")
    cfg.set("model", model if isinstance(model, str) else None, at)
    for name in ("tokenizer", "dtype"):
        value = args.get(name)
        cfg.set(name, value if isinstance(value, str) else None, at)
    mml = args.get("max_model_len")
    cfg.set("max_model_len", mml if isinstance(mml, int) else None, at)
    spec = _speculative(args.get("speculative_config"))
    if spec is None:
        return
    try:
        s = speculation_of(spec)
    except (ValueError, TypeError):   # a k that is not a number: the config is not read
        return
    cfg.set("method", s.method if isinstance(s.method, str) else None, at)
    cfg.set("draft", s.drafter if isinstance(s.drafter, str) else None, at)
    cfg.set("k", s.k if s.k is not None and s.k > 0 else None, at)
    if s.options:
        cfg.set("options", s.options, at)


def _from_engine(cfg: StartupConfig, engine: dict[str, Any], at: str) -> None:
    cfg.where["engine"] = at
    for name in ("model", "tokenizer", "dtype", "max_model_len", "version"):
        cfg.set(name, engine.get(name), at)
    if "speculative_config" not in engine:
        return
    spec = engine["speculative_config"]
    if spec is None:
        cfg.speculation_off = True
        cfg.where["speculation_off"] = at
        return
    cfg.set("method", spec["method"], at)
    cfg.set("k", spec["num_speculative_tokens"], at)
    cfg.set("draft", spec["model"], at)


def startup_config(path: str, label: str | None = None) -> StartupConfig | None:
    """The last server start a vLLM log file names (``label`` names it in ``where``)."""
    from specdoctor.sources.scan import iter_marked_lines

    return read_startup(iter_marked_lines(path, MARKERS), label or path)
