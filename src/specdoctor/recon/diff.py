"""`recon diff A B`: the chain files that changed between two snapshots, as unified diffs.

Files are paired by package path; a file that only moved (same sha256, new
path) is reported as moved, not as one removal plus one addition. Either side
may be a SOURCE instead of a snapshot: it is extracted first with the other
side's picks, so `recon diff snap/ pip:vllm==0.10.0` compares like with like.

Each file's bytes are checked against its manifest first: a file edited (or deleted) after
extraction is compared as it is now and reported as such, never passed off as the source's.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from specdoctor.recon.manifest import FileRecord, Snapshot, read_member

CONTEXT = 3  # lines of context around a change, as diff -u

STATUSES = ("changed", "added", "removed", "moved", "same")


@dataclass
class FileDiff:
    path: str
    status: str  # one of STATUSES
    a: FileRecord | None = None
    b: FileRecord | None = None
    moved_from: str | None = None
    added_lines: int = 0
    removed_lines: int = 0
    text: str = ""  # unified diff, empty unless changed


@dataclass(frozen=True)
class Edited:
    """A snapshot file whose bytes no longer match its manifest."""

    side: str  # "a" or "b"
    path: str
    recorded_sha256: str
    sha256: str | None  # None: the file is gone

    def describe(self) -> str:
        if self.sha256 is None:
            return f"{self.side}: {self.path} is missing (deleted after extraction)"
        return (f"{self.side}: {self.path} was edited after extraction (manifest "
                f"{self.recorded_sha256[:12]}, file now {self.sha256[:12]}): compared as it is now")


@dataclass
class SnapshotDiff:
    a: Snapshot
    b: Snapshot
    files: list[FileDiff] = field(default_factory=list)
    edited: list[Edited] = field(default_factory=list)

    def by_status(self, status: str) -> list[FileDiff]:
        return [f for f in self.files if f.status == status]

    @property
    def identical(self) -> bool:
        return all(f.status == "same" for f in self.files)


def diff_snapshots(a: Snapshot, a_dir: Path, b: Snapshot, b_dir: Path,
                   context: int = CONTEXT, include_same: bool = False) -> SnapshotDiff:
    out = SnapshotDiff(a, b)
    a_files = _as_now(a, a_dir, "a", out.edited)
    b_files = _as_now(b, b_dir, "b", out.edited)
    added = {p: f for p, f in b_files.items() if p not in a_files}
    removed = {p: f for p, f in a_files.items() if p not in b_files}
    by_sha = {f.sha256: p for p, f in removed.items()}
    for path in sorted(a_files.keys() & b_files.keys()):
        fa, fb = a_files[path], b_files[path]
        if fa.sha256 == fb.sha256:
            if include_same:
                out.files.append(FileDiff(path, "same", fa, fb))
            continue
        out.files.append(_changed(path, fa, a_dir, fb, b_dir, a.label(), b.label(), context))
    for path in sorted(added):
        source = by_sha.pop(added[path].sha256, None)
        if source is not None:
            del removed[source]
            out.files.append(FileDiff(path, "moved", a_files[source], added[path], moved_from=source))
        else:
            lines = _lines(b_dir, path)
            out.files.append(FileDiff(path, "added", None, added[path], added_lines=len(lines)))
    for path in sorted(removed):
        lines = _lines(a_dir, path)
        out.files.append(FileDiff(path, "removed", removed[path], None, removed_lines=len(lines)))
    order = {s: i for i, s in enumerate(STATUSES)}
    out.files.sort(key=lambda f: (order[f.status], f.path))
    return out


def _as_now(snap: Snapshot, root: Path, side: str, edited: list[Edited]) -> dict[str, FileRecord]:
    """The snapshot's records with each sha256 and size taken from the bytes on disk now."""
    out: dict[str, FileRecord] = {}
    for f in snap.files:
        try:
            raw = read_member(root, f.path)
        except OSError:
            edited.append(Edited(side, f.path, f.sha256, None))
            continue
        sha = hashlib.sha256(raw).hexdigest()
        if sha != f.sha256:
            edited.append(Edited(side, f.path, f.sha256, sha))
            f = replace(f, sha256=sha, size=len(raw))
        out[f.path] = f
    return out


def _changed(path: str, fa: FileRecord, a_dir: Path, fb: FileRecord, b_dir: Path,
             a_label: str, b_label: str, context: int) -> FileDiff:
    la, lb = _lines(a_dir, path), _lines(b_dir, path)
    text_lines = list(difflib.unified_diff(
        la, lb, fromfile=f"a/{path}", tofile=f"b/{path}", n=context, lineterm=""))
    plus = sum(1 for ln in text_lines if ln.startswith("+") and not ln.startswith("+++"))
    minus = sum(1 for ln in text_lines if ln.startswith("-") and not ln.startswith("---"))
    header = f"# a: {a_label} @ {fa.sha256[:12]}\n# b: {b_label} @ {fb.sha256[:12]}\n"
    return FileDiff(path, "changed", fa, fb, added_lines=plus, removed_lines=minus,
                    text=header + "\n".join(text_lines) + "\n")


def _lines(root: Path, rel: str) -> list[str]:
    try:
        raw = read_member(root, rel)
    except OSError:
        return []
    if b"\0" in raw[:8192]:
        return [f"<binary file, {len(raw)} bytes>"]
    return raw.decode("utf-8", "replace").splitlines()
