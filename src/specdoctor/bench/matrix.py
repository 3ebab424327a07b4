"""The benchmark matrix: prompt sets × sampling × concurrency, and the requests of one cell.

Prompt sets: the built-in suites (``code``, ``essay``; ``long`` fills a chosen context before
decoding) and the categories of a user dataset (``--dataset``: Spec-Bench / SPEED-Bench question
files, JSONL or parquet, each line with ``category`` and ``turns``; every category becomes a
row of the matrix). Sampling: ``greedy`` (temperature 0) and ``official`` (temperature 1.0,
top_p 0.95, overridable). Every request of a cell has its own seed (base + index), so sampled
runs repeat exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor.bench.client import Outcome, Request
from specdoctor.bench.prompts import SUITES, check_concurrency, check_count
from specdoctor.errors import InputError
from specdoctor.textfile import MAX_TEXT, read_limited

BUILTIN = ("code", "essay", "long")
SAMPLING = {"greedy": (0.0, 1.0), "official": (1.0, 0.95)}


@dataclass(frozen=True)
class Cell:
    """One row of the matrix, before configurations and repeats."""

    suite: str
    sampling: str
    concurrency: int

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.sampling}/c{self.concurrency}"


@dataclass(frozen=True)
class MatrixParams:
    suites: tuple[str, ...] = ("essay", "code")
    sampling: tuple[str, ...] = ("greedy", "official")
    concurrency: tuple[int, ...] = (1, 8)
    num_prompts: int = 16
    max_tokens: int = 64
    endpoint: str = "completions"  # or "chat"
    official_temperature: float = 1.0
    official_top_p: float = 0.95
    seed: int = 0
    long_chars: int = 2400  # the long suite's prompt length in characters
    dataset: str | None = None
    model: str | None = None
    timeout_s: float = 300.0
    ignore_eos: bool = True

    def cells(self) -> list[Cell]:
        return [Cell(s, m, c) for s in self.suites for m in self.sampling for c in self.concurrency]

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for key in ("suites", "sampling", "concurrency"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MatrixParams:
        d = dict(d)
        for key in ("suites", "sampling", "concurrency"):
            d[key] = tuple(d[key])
        return cls(**d)


def check(p: MatrixParams) -> None:
    for m in p.sampling:
        if m not in SAMPLING:
            raise InputError(f"unknown sampling {m!r}", f"choose from: {', '.join(SAMPLING)}")
    if p.max_tokens < 1:
        raise InputError("--max-tokens must be at least 1", "e.g. --max-tokens 64")
    check_count(p.num_prompts)
    for c in p.concurrency:
        check_concurrency(c)
    if p.endpoint not in ("completions", "chat"):
        raise InputError(f"unknown endpoint {p.endpoint!r}", "use --endpoint completions or chat")
    known = set(BUILTIN) | set(dataset_categories(p.dataset) if p.dataset else ())
    for s in p.suites:
        if s not in known:
            raise InputError(f"unknown suite {s!r}",
                             f"choose from: {', '.join(sorted(known))} (--dataset adds its categories)")


# ---- prompts -----------------------------------------------------------------------------

def _long_prompt(chars: int, variant: int) -> str:
    code = SUITES["code"]
    parts, n, i = [], 0, variant
    while n < chars:
        piece = code[i % len(code)]
        parts.append(piece)
        n += len(piece) + 1
        i += 1
    return "\n".join(parts)[-chars:]


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError(f"{path} is parquet and pyarrow is not installed",
                             "pip install pyarrow, or convert the file to JSONL") from None
        try:
            return pq.read_table(path).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(f"{path} is not a readable parquet file: {exc}",
                             "check --dataset") from exc
    rows = []
    try:
        text = read_limited(path, "dataset", MAX_TEXT, "--dataset").decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the dataset {path}: {exc.strerror}", "check --dataset") from exc
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text (a binary file?)",
                         "pass a JSONL file of {\"category\": …, \"turns\": […]} objects") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            raise InputError(f"{path}:{n} is not JSON", "each line must be one JSON object") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{n} is not a JSON object", "each line must be one object")
        rows.append(row)
    return rows


def _turns(row: dict[str, Any], where: str) -> list[str]:
    turns = row.get("turns")
    if isinstance(turns, str):
        turns = [turns]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        for key in ("prompt", "question", "text"):  # single-prompt files
            if isinstance(row.get(key), str):
                return [row[key]]
        raise InputError(f"{where} has no 'turns' list of strings",
                         "Spec-Bench/SPEED-Bench lines look like {\"category\": …, \"turns\": [\"…\"]}")
    return turns


def dataset_items(path: str) -> dict[str, list[list[str]]]:
    """Category → conversations (each a list of user turns), in file order."""
    rows = _read_rows(Path(path))
    if not rows:
        raise InputError(f"the dataset {path} is empty", "pass a JSONL file with one question a line")
    out: dict[str, list[list[str]]] = {}
    for n, row in enumerate(rows, 1):
        out.setdefault(str(row.get("category") or "default"), []).append(_turns(row, f"{path}:{n}"))
    return out


def dataset_categories(path: str) -> list[str]:
    return list(dataset_items(path))


def conversations(p: MatrixParams, suite: str) -> list[list[str]]:
    """The first ``num_prompts`` conversations of a prompt set (cycling when it is shorter)."""
    if p.dataset and suite not in BUILTIN:
        items = dataset_items(p.dataset)[suite]
    elif suite == "long":
        items = [[_long_prompt(p.long_chars, i)] for i in range(8)]
    else:
        items = [[t] for t in SUITES[suite]]
    return [items[i % len(items)] for i in range(p.num_prompts)]


def _body(p: MatrixParams, cell: Cell, model: str, history: list[dict[str, str]],
          index: int) -> dict[str, Any]:
    temp, top_p = (p.official_temperature, p.official_top_p) if cell.sampling == "official" else (0.0, 1.0)
    body: dict[str, Any] = {"model": model, "max_tokens": p.max_tokens, "temperature": temp,
                            "top_p": top_p, "seed": p.seed + index, "stream": True,
                            "stream_options": {"include_usage": True}}
    if p.ignore_eos:
        body["ignore_eos"] = True
    if p.endpoint == "chat":
        body["messages"] = history
    else:
        body["prompt"] = _as_prompt(history)
    return body


def _as_prompt(history: list[dict[str, str]]) -> str:
    if len(history) == 1:
        return history[0]["content"]
    return "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in history) + "Assistant:"


def requests(p: MatrixParams, cell: Cell, model: str) -> list[list[Request]]:
    """The cell's items: one list of turns (requests) per conversation; request indexes are
    unique in the cell (conversation × 100 + turn for multi-turn sets)."""
    path = "/v1/chat/completions" if p.endpoint == "chat" else "/v1/completions"
    out = []
    convs = conversations(p, cell.suite)
    multi = any(len(c) > 1 for c in convs)
    for i, turns in enumerate(convs):
        item = []
        for t, text in enumerate(turns):
            idx = i * 100 + t if multi else i
            hist = [{"role": "user", "content": text}]
            item.append(Request(idx, path, _body(p, cell, model, hist, idx),
                                collect_text=multi and t + 1 < len(turns), messages=tuple(hist)))
        out.append(item)
    return out


def next_turn(req: Request, prev_req: Request, prev: Outcome) -> Request:
    """Turn t+1 with the conversation so far: the previous turn's messages and its answer."""
    hist = [*prev_req.messages, {"role": "assistant", "content": prev.text}, *req.messages[-1:]]
    body = dict(req.body)
    if "messages" in body:
        body["messages"] = hist
    else:
        body["prompt"] = _as_prompt(hist)
    return Request(req.index, req.path, body, req.collect_text, tuple(hist))
