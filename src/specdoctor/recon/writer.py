"""Writing picked files into a snapshot directory, safely, within limits.

Archives are untrusted. Every file is written below the output directory by
its cleaned package path (no absolute paths, no `..`), through directories that
this writer checks are real directories (not symlinks), opened with O_NOFOLLOW,
and never as a link: archive symlinks and hardlinks are not recreated. Sizes
and counts are capped so a hostile archive cannot fill the disk.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specdoctor.errors import InputError

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    max_files: int = 10_000
    max_file_bytes: int = 256 * MiB
    max_total_bytes: int = 2048 * MiB
    # Scanning limits: decompression bombs and header floods.
    max_members: int = 5_000_000
    max_scanned_bytes: int = 512 * 1024 * MiB


class LimitExceeded(InputError):
    pass


class SafeWriter:
    """Writes files under `root`; tracks what it wrote so a caller can undo it."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.limits = limits
        self.written: dict[str, int] = {}  # package path -> size, for limits and undo
        self.made_dirs: list[Path] = []
        if not root.exists():
            try:
                root.mkdir(parents=True)
            except OSError as exc:
                raise InputError(f"cannot make the output folder {root}: {exc.strerror or exc}",
                                 "pass -o a folder on a writable disk") from exc
            self.made_dirs.append(root)

    @property
    def total(self) -> int:
        return sum(self.written.values())

    def write(self, rel: str, read: Callable[[int], bytes], declared: int) -> tuple[str, int]:
        """Stream `read` into root/rel; returns (sha256 hex, size)."""
        if declared > self.limits.max_file_bytes:
            raise LimitExceeded(
                f"{rel!r} is {declared} bytes, over the per-file limit of "
                f"{self.limits.max_file_bytes}", "raise it with --max-file-size if this is expected")
        if rel not in self.written and len(self.written) >= self.limits.max_files:
            raise LimitExceeded(f"more than {self.limits.max_files} files picked",
                                "narrow --pick, or raise --max-files")
        target = self._target(rel)
        base = self.total - self.written.get(rel, 0)
        tmp = target.with_name(f".{target.name}.part")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        digest = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := read(1 << 20):
                    size += len(chunk)
                    if size > self.limits.max_file_bytes:
                        raise LimitExceeded(
                            f"{rel!r} grows past the per-file limit of "
                            f"{self.limits.max_file_bytes} bytes",
                            "raise it with --max-file-size if this is expected")
                    if base + size > self.limits.max_total_bytes:
                        raise LimitExceeded(
                            f"the snapshot grows past {self.limits.max_total_bytes} bytes",
                            "pick fewer files, or raise --max-total-size")
                    digest.update(chunk)
                    out.write(chunk)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.written[rel] = size
        return digest.hexdigest(), size

    def remove(self, rel: str) -> None:
        """Delete a file this writer wrote (a whiteout in a later layer hid it)."""
        if self.written.pop(rel, None) is None:
            return
        target = self._target(rel, create=False)
        if target is not None and target.is_file():
            target.unlink()

    def undo(self) -> None:
        """Remove every file and directory this writer made (after a failed extraction)."""
        for rel in list(self.written):
            self.remove(rel)
        for d in sorted(self.made_dirs, key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass  # not empty: it holds something this writer did not make

    def read_back(self, rel: str) -> Callable[[int], bytes]:
        target = self._target(rel, create=False)
        assert target is not None
        fh = open(target, "rb")  # noqa: SIM115 - closed when exhausted
        def read(n: int) -> bytes:
            data = fh.read(n)
            if not data:
                fh.close()
            return data
        return read

    def _target(self, rel: str, create: bool = True) -> Path:
        parts = rel.split("/")
        if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise InputError(f"refusing to write {rel!r}", "archive path is not a clean relative path")
        cur = self.root
        for part in parts[:-1]:
            cur = cur / part
            try:
                st = os.lstat(cur)
            except FileNotFoundError:
                if not create:
                    return None  # type: ignore[return-value]
                os.mkdir(cur)
                self.made_dirs.append(cur)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise InputError(f"refusing to write through {cur}: not a plain directory",
                                 "use an empty output directory")
        target = cur / parts[-1]
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return target
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"refusing to overwrite {target}: not a regular file",
                             "use an empty output directory")
        return target
