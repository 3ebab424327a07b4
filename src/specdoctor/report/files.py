"""Writing a file into a folder the user named, without following a link found there.

A report folder may already hold entries specdoctor did not make (``-o`` names any folder). A
plain ``open(path, "w")`` writes through a symlink named ``report.md`` to wherever it points.
``write_file`` writes a new temporary file in the same folder (created exclusively, never
through a link) and renames it over the name: a link there is replaced by the file, and what it
pointed at is left as it was.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from specdoctor.errors import InputError


def write_file(path: Path, data: str | bytes) -> Path:
    """Put ``data`` (text is written as UTF-8) at ``path`` atomically; returns ``path``. An
    existing regular file or symlink at ``path`` is replaced; a directory there is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot write {path}: a directory is in the way",
                         "pass --out to another folder, or move the directory")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
