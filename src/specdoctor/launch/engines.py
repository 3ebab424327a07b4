"""What specdoctor knows of each engine's command line: how to recognise it, where speculation
is configured, the default port, and which environment variable moves its compile cache.

One adapter per engine, each a pair of pure functions (read the speculation out of argv,
write one into argv), so editing k, the method or the drafter changes exactly the user's own
arguments and nothing else.

- vLLM (``vllm serve MODEL …`` or ``python -m vllm.entrypoints.openai.api_server …``):
  ``--speculative-config JSON`` plus its dotted overrides (``--speculative-config.k v``);
  method, ``model`` (the drafter) and ``num_speculative_tokens`` (k).
- SGLang (``python -m sglang.launch_server …``): ``--speculative-algorithm``,
  ``--speculative-draft-model-path``, ``--speculative-num-steps`` (k), and for a chain
  (``--speculative-eagle-topk`` 1) ``--speculative-num-draft-tokens`` = k + 1.
- llama.cpp (``llama-server …``): ``-md/--model-draft`` and ``--draft-max`` (k); current servers
  spell them ``--spec-draft-model`` and ``--spec-draft-n-max`` (``--draft-max`` and
  ``--draft-min`` were removed: the server refuses them), and spell the drafter's other options
  ``--spec-draft-*``. Two of those change what is drafted, so they are read into the options as
  llama.cpp names them: ``p_min`` (``--spec-draft-p-min``: drafting stops at the first token
  whose probability is under it) and ``n_min`` (``--spec-draft-n-min``: a shorter draft is
  dropped).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, ClassVar, Protocol

from specdoctor.errors import InputError
from specdoctor.launch import argv as A


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding as configured on a command line, in vLLM's terms.

    ``method`` is vLLM's name (draft_model, ngram, eagle, eagle3, mtp, dflash, …); ``options``
    holds every other key of the engine's configuration, kept verbatim."""

    method: str | None
    k: int | None
    drafter: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


class Engine(Protocol):
    name: str
    default_port: int
    cache_env: tuple[str, ...]

    def detect(self, argv: Sequence[str]) -> bool: ...

    def read(self, argv: Sequence[str]) -> Speculation | None: ...

    def write(self, argv: Sequence[str], spec: Speculation | None) -> tuple[str, ...]: ...


def _entry(argv: Sequence[str]) -> list[str]:
    """argv without the interpreter: ``python -m mod …`` → ``[mod, …]``; ``/x/vllm serve`` →
    ``[vllm, serve, …]``."""
    args = list(argv)
    if args and PurePath(args[0]).name.startswith("python"):
        args = args[1:]
        if args[:1] == ["-m"]:
            args = args[1:]
    if args:
        args[0] = PurePath(args[0]).name
    return args


class Vllm:
    name = "vllm"
    default_port = 8000
    cache_env = ("VLLM_CACHE_ROOT",)
    FLAG = "--speculative-config"

    def detect(self, argv: Sequence[str]) -> bool:
        e = _entry(argv)
        return bool(e) and (e[0].startswith("vllm.entrypoints") or e[:2] == ["vllm", "serve"])

    def read(self, argv: Sequence[str]) -> Speculation | None:
        cfg: dict[str, Any] = {}
        raw = A.get(argv, self.FLAG)
        if raw is not None:
            try:
                cfg = json.loads(raw)
            except ValueError as exc:
                raise InputError(f"--speculative-config is not JSON: {raw[:80]!r}",
                                 "quote the JSON in the command, e.g. '{\"method\":\"ngram\"}'") from exc
            if not isinstance(cfg, dict):
                raise InputError("--speculative-config must be a JSON object", "e.g. '{\"method\":\"ngram\"}'")
        for key, value in A.with_prefix(argv, self.FLAG + "."):
            cfg[key.replace("-", "_")] = _scalar(value)
        legacy_model = A.get(argv, "--speculative-model")
        legacy_k = A.get(argv, "--num-speculative-tokens")
        if legacy_model is not None:
            cfg.setdefault("model", legacy_model)
        if legacy_k is not None:
            cfg.setdefault("num_speculative_tokens", int(legacy_k))
        return speculation_of(cfg) if cfg else None

    def write(self, argv: Sequence[str], spec: Speculation | None) -> tuple[str, ...]:
        had = A.has(argv, self.FLAG)
        out = A.drop_prefix(argv, self.FLAG + ".")
        out = A.drop(out, "--speculative-model", "--num-speculative-tokens")
        if spec is None:
            # vLLM refuses per-request spec-decode metrics without speculation (0.32: "requires
            # speculative decoding"), so the baseline drops them too
            return A.drop(out, self.FLAG, "--per-request-spec-decode-metrics")
        cfg: dict[str, Any] = {}
        if spec.method is not None:
            cfg["method"] = spec.method
        if spec.drafter is not None:
            cfg["model"] = spec.drafter
        if spec.k is not None:
            cfg["num_speculative_tokens"] = spec.k
        cfg.update(spec.options)
        text = json.dumps(cfg, separators=(",", ":"))
        return A.put(out, self.FLAG, text) if had else (*out, self.FLAG, text)


def speculation_of(config: dict[str, Any]) -> Speculation:
    """A vLLM speculative config (the JSON of ``--speculative-config``, or the dict a start-up
    log prints) in these terms: a config naming only a drafter model is draft_model."""
    cfg = dict(config)
    method = cfg.pop("method", None)
    k = cfg.pop("num_speculative_tokens", None)
    drafter = cfg.pop("model", None)
    if method is None and drafter is not None:
        method = "draft_model"
    return Speculation(method, None if k is None else int(k), drafter, cfg)


class Sglang:
    name = "sglang"
    default_port = 30000
    cache_env = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    ALGO = "--speculative-algorithm"
    # SGLang's algorithm names ↔ vLLM's method names
    TO_METHOD: ClassVar[dict[str, str]] = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "NGRAM": "ngram",
                 "STANDALONE": "draft_model"}

    def detect(self, argv: Sequence[str]) -> bool:
        e = _entry(argv)
        return bool(e) and (e[0].startswith("sglang.launch_server") or e[:2] == ["sglang", "serve"])

    def read(self, argv: Sequence[str]) -> Speculation | None:
        algo = A.get(argv, self.ALGO)
        if algo is None:
            return None
        steps = A.get(argv, "--speculative-num-steps")
        options = {k.replace("-", "_"): _scalar(v) for k, v in A.with_prefix(argv, "--speculative-")
                   if k not in ("algorithm", "num-steps", "draft-model-path")}
        return Speculation(self.TO_METHOD.get(algo.upper(), algo.lower()),
                           None if steps is None else int(steps),
                           A.get(argv, "--speculative-draft-model-path"), options)

    def write(self, argv: Sequence[str], spec: Speculation | None) -> tuple[str, ...]:
        if spec is None:
            return A.drop_prefix(argv, "--speculative-")
        out = tuple(argv)
        if spec.method is not None:
            algo = {v: k for k, v in self.TO_METHOD.items()}.get(spec.method, spec.method.upper())
            out = A.put(out, self.ALGO, algo)
        if spec.drafter is not None:
            out = A.put(out, "--speculative-draft-model-path", spec.drafter)
        elif A.has(out, "--speculative-draft-model-path") and spec.method in ("ngram",):
            out = A.drop(out, "--speculative-draft-model-path")
        for key, value in spec.options.items():
            flag = "--speculative-" + key.replace("_", "-")
            out = A.put(out, flag, None if value is True else str(value))
        if spec.k is not None:
            out = A.put(out, "--speculative-num-steps", str(spec.k))
            topk = int(A.get(out, "--speculative-eagle-topk") or 1)
            if topk <= 1:  # a chain verifies k drafts plus the root token
                out = A.put(out, "--speculative-num-draft-tokens", str(spec.k + 1))
        return out


class LlamaCpp:
    name = "llamacpp"
    default_port = 8080
    cache_env: tuple[str, ...] = ()
    DRAFTER = ("-md", "--model-draft", "--spec-draft-model")
    K = ("--draft-max", "--draft", "--draft-n", "--spec-draft-n-max")
    # the drafting policy's flags (common/arg.cpp), read into the options under llama.cpp's names
    POLICY = {"p_min": (("--spec-draft-p-min", "--draft-p-min"), float),
              "n_min": (("--spec-draft-n-min", "--draft-min", "--draft-n-min"), int)}

    def detect(self, argv: Sequence[str]) -> bool:
        e = _entry(argv)
        return bool(e) and e[0] == "llama-server"

    def read(self, argv: Sequence[str]) -> Speculation | None:
        drafter = A.get(argv, *self.DRAFTER)
        k = A.get(argv, *self.K)
        if drafter is None and k is None:
            return None
        options = {}
        for key, (flags, kind) in self.POLICY.items():
            value = A.get(argv, *flags)
            if value is not None:
                try:
                    options[key] = kind(value)
                except ValueError:
                    raise InputError(f"{flags[0]} {value!r} is not a number",
                                     f"give {flags[0]} a number, as llama-server takes it"
                                     ) from None
        return Speculation("draft_model", None if k is None else int(k), drafter, options)

    def write(self, argv: Sequence[str], spec: Speculation | None) -> tuple[str, ...]:
        if spec is None:
            return A.drop_prefix(A.drop_prefix(A.drop(argv, *self.DRAFTER, "--spec-type"),
                                               "--draft"), "--spec-draft-")
        if spec.method not in (None, "draft_model"):
            raise InputError(f"llama-server has no method {spec.method!r}",
                             "llama.cpp speculates with a draft model (-md) only")
        out = tuple(argv)
        if spec.drafter is not None:
            out = A.put(A.drop(out, *self.DRAFTER[1:]), "-md", spec.drafter) if not A.has(
                out, *self.DRAFTER) else _put_any(out, self.DRAFTER, spec.drafter)
        if spec.k is not None:
            out = _put_any(out, self.K, str(spec.k))
        return out


def _put_any(argv: Sequence[str], names: Sequence[str], value: str) -> tuple[str, ...]:
    """Set whichever of the aliases the command uses (the first one when none)."""
    for n in names:
        if A.has(argv, n):
            return A.put(argv, n, value)
    return A.put(argv, names[0], value)


def _scalar(value: str | None) -> Any:
    if value is None:
        return True
    try:
        return json.loads(value)
    except ValueError:
        return value


ENGINES: tuple[Engine, ...] = (Vllm(), Sglang(), LlamaCpp())


def detect(argv: Sequence[str]) -> Engine | None:
    for e in ENGINES:
        if e.detect(argv):
            return e
    return None


def by_name(name: str) -> Engine | None:
    return next((e for e in ENGINES if e.name == name), None)
