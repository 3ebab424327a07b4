"""Citations: the file, line and sha256 of the engine code a mask model transcribes.

A code root is a recon snapshot (its manifest gives the version and the digest
the file was extracted from) or a site-packages directory (the installed engine,
found without importing it). An `Anchor` is a regular expression for the line a
model depends on; its groups carry the convention (`<` or `<=`, `- 1` or not),
so the model reads the convention from the code instead of assuming it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from specdoctor.errors import InputError
from specdoctor.recon.manifest import is_snapshot, load_snapshot


@dataclass(frozen=True)
class Anchor:
    key: str  # what the model uses it for
    path: str  # package path, e.g. vllm/v1/attention/backends/flex_attention.py
    pattern: str  # regular expression matched line by line


@dataclass(frozen=True)
class Citation:
    key: str
    path: str
    line: int | None
    sha256: str | None
    text: str
    groups: tuple[str | None, ...] = ()
    origin: str = ""  # "snapshot vllm 0.28.0 (sha256:…)" or "installed"

    @property
    def found(self) -> bool:
        return self.line is not None

    def short(self, brief: bool = False) -> str:
        path = self.path.rsplit("/", 1)[-1] if brief else self.path
        if not self.found:
            return f"{path}: not found ({self.key})"
        return f"{path}:{self.line} @ {str(self.sha256)[:12]}"


class CodeRoot:
    """Where cited files are looked up: a snapshot, else the installed packages."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.snapshot = load_snapshot(root) if root is not None and is_snapshot(root) else None
        if root is not None and not root.is_dir():
            raise InputError(f"{root} is not a directory",
                             "pass a recon snapshot or a site-packages directory with --code")
        self._cache: dict[str, tuple[list[str], str, str] | None] = {}

    def label(self) -> str:
        if self.snapshot is not None:
            return f"snapshot {self.root} ({self.snapshot.label()})"
        return str(self.root) if self.root else "installed packages"

    def _load(self, rel: str) -> tuple[list[str], str, str] | None:
        if rel in self._cache:
            return self._cache[rel]
        found = None
        candidates: list[tuple[Path, str]] = []
        if self.root is not None:
            origin = (f"snapshot {self.snapshot.label()}" if self.snapshot is not None
                      else f"directory {self.root}")
            candidates.append((self.root / rel, origin))
        top = rel.split("/", 1)[0]
        covered = self.snapshot is not None and any(
            f.path.split("/", 1)[0] == top for f in self.snapshot.files)
        # A vLLM snapshot says nothing about torch: such files come from the installed copy.
        if self.root is None or not covered:
            installed = _installed_root(top)
            if installed is not None:
                candidates.append((installed / rel, "installed"))
        for path, origin in candidates:
            if path.is_file():
                raw = path.read_bytes()
                sha = hashlib.sha256(raw).hexdigest()
                if self.snapshot is not None and origin.startswith("snapshot"):
                    rec = self.snapshot.file(rel)
                    if rec is not None and rec.sha256 != sha:
                        origin += " (edited since extraction!)"
                found = (raw.decode("utf-8", "replace").splitlines(), sha, origin)
                break
        self._cache[rel] = found
        return found

    def cite(self, anchor: Anchor) -> Citation:
        loaded = self._load(anchor.path)
        if loaded is None:
            return Citation(anchor.key, anchor.path, None, None, "file not in this code root")
        lines, sha, origin = loaded
        rx = re.compile(anchor.pattern)
        for i, line in enumerate(lines, start=1):
            m = rx.search(line)
            if m:
                return Citation(anchor.key, anchor.path, i, sha, line.strip(), m.groups(), origin)
        return Citation(anchor.key, anchor.path, None, sha, "pattern not found", (), origin)


def _installed_root(top: str) -> Path | None:
    spec = importlib.util.find_spec(top)  # top-level lookup: nothing is imported
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent
