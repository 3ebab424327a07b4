"""vLLM's compile cache on disk, and which launch wrote or loaded each entry (from start-up logs).

Layouts (vLLM 0.32, under ``$VLLM_CACHE_ROOT/torch_compile_cache/``):
- VLLM_COMPILE: ``<hash10>/rank_<r>_<dp>/<tag>/`` (tags ``backbone``, ``draft_model``,
  ``eagle_head``, ``dflash_head``, …) with ``cache_key_factors.json`` inside;
- AOT: ``torch_aot_compile/<sha256>/rank_<r>_<dp>/model``; the tag is not in the path, only in
  the log line that saved or loaded it.

Log lines (vllm/compilation/decorators.py and backends.py), each prefixed ``[tag] ``:
``saved AOT compiled function to P``, ``Directly load AOT compilation from path P``,
``Compiling model again due to a load failure from P, reason: R``,
``Using cache directory: D for vLLM's torch.compile``.
A launch is named by its log and the ``speculative_config=…`` of its engine line.

The flag that matters (vllm#53366, Case A): one key used by launches whose speculative configs
differ — the key does not cover k or the method, so one launch may run another's graph.
Read-only: nothing here writes, moves or deletes a cache file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.textfile import read_text

CACHE_DIR = "torch_compile_cache"
AOT_DIR = "torch_aot_compile"
_RANK = re.compile(r"^rank_(\d+)_(\d+)$")
_SAVED = re.compile(r"\[(\w+)\] saved AOT compiled function to (\S+)")
_LOADED = re.compile(r"\[(\w+)\] Directly load AOT compilation from path (\S+)")
_FAILED = re.compile(r"\[(\w+)\] Compiling model again due to a load failure from (\S+?),"
                     r" reason: (.*)$")
_USING = re.compile(r"\[(\w+)\] Using cache directory: (\S+) for vLLM's torch.compile")
_SPEC = re.compile(r"speculative_config=(SpeculativeConfig\(.*?\)|None)")


@dataclass
class Use:
    log: str
    action: str          # "saved", "loaded", "load-failed", "using"
    tag: str
    spec: str | None     # the launch's speculative config as its log printed it
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Entry:
    layout: str          # "aot" or "vllm_compile"
    key: str
    rank: int
    dp_rank: int
    tag: str | None
    path: str
    size_bytes: int
    mtime: float
    uses: list[Use] = field(default_factory=list)

    def specs(self) -> set[str]:
        return {u.spec for u in self.uses if u.spec}

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "uses"}
        d["uses"] = [u.to_json() for u in self.uses]
        return d


@dataclass
class CacheScan:
    root: str
    entries: list[Entry]
    logs: list[str]
    unmatched_uses: list[Use] = field(default_factory=list)  # logged paths no longer on disk

    def shared_keys(self) -> list[Entry]:
        """Entries used by launches whose speculative configs differ (the pollution risk)."""
        return [e for e in self.entries if len(e.specs()) > 1]

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "logs": self.logs,
                "entries": [e.to_json() for e in self.entries],
                "shared_keys": [e.key for e in self.shared_keys()],
                "unmatched_uses": [u.to_json() for u in self.unmatched_uses]}


def default_root() -> Path:
    env = os.environ.get("VLLM_CACHE_ROOT")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vllm"


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    total = 0
    for dirpath, _, files in os.walk(p):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def entries(root: Path) -> list[Entry]:
    """Every cache entry under ``root`` (a VLLM_CACHE_ROOT or its torch_compile_cache)."""
    base = root / CACHE_DIR if (root / CACHE_DIR).is_dir() else root
    out: list[Entry] = []
    if not base.is_dir():
        return out
    aot = base / AOT_DIR
    for key_dir in sorted(aot.iterdir()) if aot.is_dir() else []:
        for rank_dir in sorted(key_dir.iterdir()) if key_dir.is_dir() else []:
            m = _RANK.match(rank_dir.name)
            model = rank_dir / "model"
            if m and model.exists():
                st = model.stat()
                out.append(Entry("aot", key_dir.name, int(m.group(1)), int(m.group(2)), None,
                                 str(model), _size(key_dir), st.st_mtime))
    for key_dir in sorted(base.iterdir()):
        if key_dir.name == AOT_DIR or not key_dir.is_dir():
            continue
        for rank_dir in sorted(key_dir.iterdir()):
            m = _RANK.match(rank_dir.name)
            if not (m and rank_dir.is_dir()):
                continue
            for tag_dir in sorted(p for p in rank_dir.iterdir() if p.is_dir()):
                st = tag_dir.stat()
                out.append(Entry("vllm_compile", key_dir.name, int(m.group(1)), int(m.group(2)),
                                 tag_dir.name, str(tag_dir), _size(tag_dir), st.st_mtime))
    return out


def log_uses(text: str, log_name: str) -> list[tuple[str, Use]]:
    """(path, use) for every cache line of one start-up log."""
    spec_m = _SPEC.search(text)
    spec = spec_m.group(1) if spec_m else None
    out = []
    for line in text.splitlines():
        if "AOT" not in line and "cache directory" not in line and "load failure" not in line:
            continue
        for pat, action in ((_SAVED, "saved"), (_LOADED, "loaded"), (_FAILED, "load-failed"),
                            (_USING, "using")):
            m = pat.search(line)
            if m:
                reason = m.group(3).strip() if action == "load-failed" else ""
                out.append((m.group(2), Use(log_name, action, m.group(1), spec, reason)))
                break
    return out


def scan(root: Path, logs: Sequence[Path] = ()) -> CacheScan:
    """Entries under ``root``, each with the launches (logs) that saved, loaded or failed to
    load it; the tag of an AOT entry comes from those lines."""
    found = entries(root)
    by_path: dict[str, Entry] = {}
    for e in found:
        by_path[os.path.normpath(e.path)] = e
    unmatched: list[Use] = []
    for log in logs:
        text = read_text(log, "start-up log")  # an unreadable or binary log is refused, not skipped
        for path, use in log_uses(text, str(log)):
            e = by_path.get(os.path.normpath(path))
            if e is None and use.action == "using":
                # VLLM_COMPILE names the tag directory's parent rank dir + prefix
                e = by_path.get(os.path.normpath(os.path.join(path, use.tag)))
            if e is None:
                unmatched.append(use)
                continue
            e.uses.append(use)
            if e.tag is None:
                e.tag = use.tag
    return CacheScan(str(root), found, [str(p) for p in logs], unmatched)
