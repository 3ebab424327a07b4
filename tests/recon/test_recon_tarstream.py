"""The tar parser against tarfile's own writers: every format, long names, bad input."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from specdoctor.errors import InputError
from specdoctor.recon.tarstream import FileSection, StreamSource, iter_members


def _archive(fmt: int) -> tuple[bytes, dict[str, bytes]]:
    files = {
        "a.txt": b"hello\n",
        "deep/" + "x" * 120 + "/name.py": b"print('long')\n" * 50,  # > 100 chars: GNU L / pax path
        "sizes/exactly512": b"z" * 512,
        "sizes/empty": b"",
        "unicodé/файл.py": b"# utf-8 names\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in files.items():
            if fmt == tarfile.USTAR_FORMAT and len(name.encode()) > 100 and "/" not in name[-100:]:
                continue
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        link = tarfile.TarInfo("link-to-a")
        link.type, link.linkname = tarfile.SYMTYPE, "a.txt"
        tf.addfile(link)
    return buf.getvalue(), files


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_every_tar_format_reads_like_tarfile(tmp_path, fmt):
    data, files = _archive(fmt)
    expected = {ti.name: (ti.type, ti.size) for ti in tarfile.open(fileobj=io.BytesIO(data))}
    path = tmp_path / "a.tar"
    path.write_bytes(data)
    seen = {}
    fd = os.open(path, os.O_RDONLY)
    try:
        for m in iter_members(FileSection(fd, 0, len(data))):
            body = b"".join(iter(lambda m=m: m.read(7), b"")) if m.kind == "file" else b""
            seen[m.name] = (m.kind, body, m.linkname)
    finally:
        os.close(fd)
    assert set(seen) == set(expected)
    for name, (kind, body, link) in seen.items():
        if kind == "file":
            assert body == files[name]
        else:
            assert (kind, link) == ("symlink", "a.txt")


def test_unread_bodies_are_skipped_on_a_stream():
    data, files = _archive(tarfile.PAX_FORMAT)
    names = [m.name for m in iter_members(StreamSource(io.BytesIO(data)))]
    assert set(files) <= set(names)


def test_truncated_archive_is_a_clear_error():
    data, _ = _archive(tarfile.PAX_FORMAT)
    with pytest.raises(InputError, match="truncated|ends inside"):
        for m in iter_members(StreamSource(io.BytesIO(data[:1300]))):
            while m.read(100):
                pass


def test_garbage_is_not_a_tar():
    with pytest.raises(InputError, match="checksum"):
        list(iter_members(StreamSource(io.BytesIO(os.urandom(4096)))))


def test_oversized_metadata_record_is_refused():
    # A pax header that claims 10 MB of metadata: a memory attack, refused before reading.
    ti = tarfile.TarInfo("x")
    ti.type = tarfile.XHDTYPE
    ti.size = 10 << 20
    header = ti.tobuf(tarfile.USTAR_FORMAT)
    with pytest.raises(InputError, match="metadata record"):
        list(iter_members(StreamSource(io.BytesIO(header + b"\0" * 1024))))
