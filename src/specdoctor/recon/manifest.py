"""The snapshot manifest: what was extracted, from where, at which digest, file by file.

A conclusion cites a snapshot file as `path @ sha256` and the manifest ties that
to the image/wheel digest and the package version, so the citation names
exact code, not "the code as I remember it".
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError

SCHEMA = "specdoctor.snapshot/1"
MANIFEST_NAME = "manifest.json"


@dataclass
class FileRecord:
    path: str  # package path, also the path inside the snapshot directory
    sha256: str
    size: int
    source_path: str  # where it was in the source (image path, wheel member)
    layer: str  # layer digest for images, "wheel" / "tree" / "export" otherwise


@dataclass
class PackageRecord:
    name: str
    version: str
    metadata_path: str


@dataclass
class Skipped:
    path: str
    reason: str


@dataclass
class Snapshot:
    source: dict[str, Any]
    packages: list[PackageRecord]
    picks: list[str]
    patterns: list[str]
    files: list[FileRecord]
    skipped: list[Skipped] = field(default_factory=list)
    created: str = ""
    schema: str = SCHEMA

    def file(self, path: str) -> FileRecord | None:
        return next((f for f in self.files if f.path == path), None)

    def label(self) -> str:
        pkgs = ", ".join(f"{p.name} {p.version}" for p in self.packages) or "no package metadata"
        return f"{pkgs} from {self.source.get('kind')} {self.source.get('ref')}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Snapshot:
        return cls(
            source=dict(data["source"]),
            packages=[PackageRecord(**p) for p in data.get("packages", [])],
            picks=list(data.get("picks", [])),
            patterns=list(data.get("patterns", [])),
            files=[FileRecord(**f) for f in data["files"]],
            skipped=[Skipped(**s) for s in data.get("skipped", [])],
            created=data.get("created", ""),
            schema=data.get("schema", SCHEMA),
        )


def is_snapshot(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST_NAME).is_file()


def load_snapshot(path: Path) -> Snapshot:
    manifest = path / MANIFEST_NAME
    if not manifest.is_file():
        raise InputError(f"{path} is not a snapshot (no {MANIFEST_NAME})",
                         "make one with `specdoctor recon extract SOURCE -o DIR`")
    try:
        data = json.loads(manifest.read_text())
        if not str(data.get("schema", "")).startswith("specdoctor.snapshot/"):
            raise ValueError("schema")
        snap = Snapshot.from_json(data)
        paths = [str(f.path) for f in snap.files]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{manifest} is not a specdoctor snapshot manifest",
                         "extract the snapshot again") from exc
    for p in paths:
        check_member(p, str(manifest))
    return snap


def check_member(rel: str, where: str) -> str:
    """``rel`` if it is a clean relative path (what the writer writes: no leading ``/``, no
    ``..``, ``.`` or empty part, no NUL); else an ``InputError`` naming it. A manifest is input:
    its paths are checked before they become paths, as an archive's members are."""
    parts = rel.split("/") if isinstance(rel, str) else [""]
    if not rel or rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise InputError(f"{where}: member path {rel!r} is not a clean relative path",
                         "a snapshot holds files below its own folder only; extract it again "
                         "with `specdoctor recon extract`")
    return rel


def member_path(root: Path, rel: str) -> Path:
    """The file of member ``rel`` under snapshot ``root``, never outside it: the path is checked
    (``check_member``) and no part of it below ``root`` may be a symlink (the writer never makes
    one; a link found there was put there later). A missing file is returned as it is (the
    caller reports it deleted)."""
    check_member(rel, f"snapshot {root}")
    base = root.resolve()
    cur = base
    for part in rel.split("/"):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return base / rel
        except OSError as exc:
            raise InputError(f"cannot read {cur}: {exc.strerror}", "check the snapshot") from exc
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"snapshot {root}: {cur.relative_to(base)} is a symlink; a "
                             "snapshot holds no links, so it is not followed",
                             "extract the snapshot again with `specdoctor recon extract`")
    return cur


def read_member(root: Path, rel: str) -> bytes:
    """The bytes of member ``rel`` (``member_path``), opened without following a link."""
    fd = os.open(member_path(root, rel), os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def write_snapshot(path: Path, snapshot: Snapshot) -> Path:
    target = path / MANIFEST_NAME
    tmp = path / f".{MANIFEST_NAME}.part"
    tmp.write_text(json.dumps(snapshot.to_json(), indent=1) + "\n")
    os.replace(tmp, target)
    return target


def parse_metadata(text: str, metadata_path: str) -> PackageRecord | None:
    """Name and Version from a dist-info METADATA file (RFC 822 headers)."""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    if name and version:
        return PackageRecord(name, version, metadata_path)
    return None
