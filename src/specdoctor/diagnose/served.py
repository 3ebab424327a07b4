"""What a diagnosis knows of a server it cannot restart: the served setup the oracle and the
static experiments need (target, drafter, tokenizer, method, k), each with where it came from.

Sources, the first that says wins:

1. the user's flags (``--target``, ``--draft``, ``--tokenizer``, ``--method``, ``--k``);
2. the server's start-up log given with ``--logs`` (``sources.vllm_startup``: the engine's
   ``SpeculativeConfig(...)`` and the API server's ``non-default args``);
3. what the server answers: ``/v1/models`` lists the served model's ``root``, the path it was
   started with (vLLM), used when it is a model directory on this machine;
4. what was read or measured: the log's metrics lines (method, k) and the greedy
   measurement's per-position counts (k).

A start-up log that does not match the server (another model than ``/v1/models`` names, or
another k than the measurement shows) is of another server or another start: none of its
settings is used, and the notes say why. Whatever stays unknown is named with the flag that
gives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.bench.measure import ModelCard
from specdoctor.experiments.launch_settings import Settings, settings_of
from specdoctor.methods import NO_DRAFT_DIR
from specdoctor.launch.engines import Speculation
from specdoctor.sources.vllm_startup import StartupConfig


@dataclass(frozen=True)
class Given:
    """The served setup as the user's flags state it."""

    target: Path | None = None
    draft: Path | None = None
    tokenizer: Path | None = None
    method: str | None = None
    k: int | None = None


@dataclass
class ServedSetup:
    """The setup decided, ``origins`` saying where each value came from, ``missing`` the flags
    that would give what is still unknown."""

    settings: Settings
    origins: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        values = {"target": s.target, "draft": s.draft, "tokenizer": s.tokenizer,
                  "method": s.method, "k": s.k}
        return {name: {"value": None if v is None else str(v) if isinstance(v, Path) else v,
                       "from": self.origins.get(name)} for name, v in values.items()} | {
            "missing": self.missing}

    def summary(self) -> str:
        """One line: each setting with its origin."""
        s = self.settings
        parts = [f"{name} {value} ({self.origins[name]})" for name, value in
                 (("target", s.target), ("draft", s.draft), ("tokenizer", s.tokenizer),
                  ("method", s.method), ("k", s.k)) if value is not None]
        return "served setup: " + ("; ".join(parts) if parts else "nothing known")


def is_model_dir(path: str | Path) -> bool:
    """An absolute path to a directory with a config.json on this machine (a relative path
    is the server's, relative to a working directory this side does not know)."""
    p = Path(path)
    return p.is_absolute() and (p / "config.json").is_file()


def decide(given: Given, cards: Sequence[ModelCard] | None = None,
           startup: StartupConfig | None = None, *, log_method: str | None = None,
           log_k: int | None = None, measured_k: int | None = None,
           url: str = "the server",
           model_dir: Callable[[str | Path], bool] = is_model_dir) -> ServedSetup:
    """The served setup from every source (see the module doc)."""
    notes: list[str] = []
    origins: dict[str, str] = {}
    root = _root(cards)
    startup = _matching(startup, root, measured_k, url, notes)

    def log(name: str) -> str:
        return f"the start-up log, {startup.where.get(name, '?')}" if startup else ""

    def said(name: str) -> Any:
        return getattr(startup, name) if startup is not None else None

    target = _first(origins, "target", [
        (given.target, "--target"),
        (root if root and model_dir(root) else None, f"/v1/models root of {url}"),
        (_local(said("model"), model_dir), log("model"))])
    if target is None:
        notes += _not_local("the served model", root or said("model"), "--target DIR")
    method = _first(origins, "method", [
        (given.method, "--method"), (said("method"), log("method")),
        (log_method, "the log's start-up lines")])
    k = _first(origins, "k", [
        (given.k, "--k"), (said("k"), log("k")), (log_k, "the log's metrics lines"),
        (measured_k, "the greedy measurement's per-position counts")])
    if k is not None and measured_k is not None and k != measured_k:
        notes.append(f"k {k} ({origins['k']}), but the greedy measurement counts {measured_k} "
                     "positions: the server drafts another k than stated")
    draft = None
    if method not in NO_DRAFT_DIR:
        draft = _first(origins, "draft", [
            (given.draft, "--draft"), (_local(said("draft"), model_dir), log("draft"))])
        if draft is None and not given.draft:
            notes += _not_local("the drafter", said("draft"), "--draft DIR")
    own_tokenizer = said("tokenizer") if said("tokenizer") != said("model") else None
    tokenizer = _first(origins, "tokenizer", [
        (given.tokenizer, "--tokenizer"), (_local(own_tokenizer, model_dir), log("tokenizer"))])
    options = dict(said("options") or {})
    if options:
        origins["options"] = log("options")
    max_len = said("max_model_len") or next(
        (c.max_model_len for c in cards or () if c.max_model_len), None)
    settings = settings_of(Speculation(method, k, str(draft) if draft else None, options),
                           Path(target) if target else None, tokenizer, said("dtype"), max_len)
    return ServedSetup(settings, origins, _missing(settings), notes)


def _root(cards: Sequence[ModelCard] | None) -> str | None:
    roots = [c.root for c in cards or () if c.root]
    return roots[0] if roots else None


def _matching(startup: StartupConfig | None, root: str | None, measured_k: int | None,
              url: str, notes: list[str]) -> StartupConfig | None:
    """The start-up config when it is this server's; else None, with the reason."""
    if startup is None:
        return None
    if root is not None and startup.model is not None and _norm(root) != _norm(startup.model):
        notes.append(f"the start-up log ({startup.where['model']}) names the model "
                     f"{startup.model}, but {url} serves {root} (/v1/models): the log is of "
                     "another server, so none of its settings is used")
        return None
    if measured_k is not None and startup.k is not None and startup.k != measured_k:
        notes.append(f"the start-up log ({startup.where['k']}) names k={startup.k}, but the "
                     f"greedy measurement counts {measured_k} positions: the log is of another "
                     "start of the server, so none of its settings is used")
        return None
    if startup.speculation_off:
        notes.append(f"the start-up log ({startup.where['speculation_off']}) says speculation "
                     "is off (speculative_config=None)")
    return startup


def _norm(path: str) -> str:
    return str(Path(path)).rstrip("/")


def _local(value: Any, model_dir: Callable[[str | Path], bool]) -> str | None:
    return value if isinstance(value, str) and model_dir(value) else None


def _first(origins: dict[str, str], name: str, candidates: list[tuple[Any, str]]) -> Any:
    for value, origin in candidates:
        if value is not None:
            origins[name] = origin
            return value
    return None


def _not_local(what: str, named: str | None, flag: str) -> list[str]:
    if not named:
        return []
    why = ("a hub id, or a path relative to the server's working directory"
           if not Path(named).is_absolute() else "not a model directory on this machine")
    return [f"{what} is {named}: {why}; give {flag} (a local copy) for the oracle and the "
            "static experiments"]


def _missing(s: Settings) -> list[str]:
    """What the oracle still needs, each with the flag that gives it."""
    out = []
    if s.target is None:
        out.append("--target DIR (the served model's directory)")
    if s.method is None:
        out.append("--method (the speculative method; or --logs with the server's start-up "
                   "log)")
    if s.k is None:
        out.append("--k (draft tokens per step)")
    if s.method not in NO_DRAFT_DIR and s.draft is None:
        out.append("--draft DIR (the drafter's directory)")
    return out
