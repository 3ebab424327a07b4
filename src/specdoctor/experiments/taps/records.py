"""Read a tap directory: one Record per safetensors file, grouped the way checks need them."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError


@dataclass
class Record:
    path: Path
    name: str
    layer: str
    rank: int
    step: int
    tensors: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name} layer {self.layer} rank {self.rank} step {self.step}"

    def need(self, *names: str) -> list[Any]:
        missing = [n for n in names if n not in self.tensors]
        if missing:
            raise InputError(f"{self.path.name} ({self.label}) has no tensor {', '.join(missing)} "
                             f"(it has {', '.join(sorted(self.tensors))})",
                             "tap every tensor the check needs (docs/kernels.md, Tensor taps)")
        return [self.tensors[n] for n in names]


def load_dir(directory: Path) -> list[Record]:
    from safetensors import safe_open

    if not directory.is_dir():
        raise InputError(f"{directory} is not a directory", "pass the directory SPECDOCTOR_TAPS pointed at")
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise InputError(f"no .safetensors taps in {directory}",
                         "run the server with SPECDOCTOR_TAPS set to this directory and a probe that taps")
    out = []
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as fh:
                head = fh.metadata() or {}
                tensors = {k: fh.get_tensor(k) for k in fh.keys()}
        except Exception as exc:
            raise InputError(f"cannot read tap {f.name}: {exc}", "the file is truncated or not safetensors") from exc
        if "name" not in head:
            raise InputError(f"{f.name} has no tap header", "write taps with specdoctor.packs.tap")
        out.append(Record(f, head["name"], head.get("layer", "0"),
                          _header_int(f, head, "rank"), _header_int(f, head, "step"), tensors,
                          _header_meta(f, head)))
    return out


MAX_HEADER_INT = 1 << 31  # ranks and steps of a tap header: a world size, a step count


def _header_int(f: Path, head: dict[str, str], key: str) -> int:
    """A tap header's rank or step: a whole number from 0 to 2^31, else the file is refused."""
    text = head.get(key, "0")
    if not (isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 10
            and int(text) <= MAX_HEADER_INT):
        raise InputError(f"{f.name}: its tap header's {key} is {text!r:.40}, not a whole number "
                         f"from 0 to {MAX_HEADER_INT:,}", "write taps with specdoctor.packs.tap")
    return int(text)


def _header_meta(f: Path, head: dict[str, str]) -> dict[str, Any]:
    try:
        meta = json.loads(head.get("meta") or "{}")
    except (ValueError, RecursionError):
        meta = None
    if not isinstance(meta, dict):
        raise InputError(f"{f.name}: its tap header's meta is not a JSON object",
                         "write taps with specdoctor.packs.tap")
    return meta


def by_step(records: list[Record]) -> dict[tuple[str, str, int], dict[int, Record]]:
    """(name, layer, step) -> {rank: record}."""
    groups: dict[tuple[str, str, int], dict[int, Record]] = defaultdict(dict)
    for r in records:
        groups[(r.name, r.layer, r.step)][r.rank] = r
    return dict(groups)
