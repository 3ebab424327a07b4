"""One-pass tar reading: headers only, bodies skipped unless asked for, constant memory.

Image layers are tars, often inside another tar (docker-archive), often
compressed. `recon extract` needs a handful of files out of a gigabyte, so the
reader parses each 512-byte header itself and skips every body it is not asked
to read: with a seek when the bytes sit plainly in a file, by decompressing past
them otherwise. Nothing is kept per member, so memory does not grow with the
archive. (`tarfile` keeps every member it has seen and is ~10x slower here.)

    with open(path, "rb") as fh:
        for member in iter_members(FileSection(fh.fileno(), 0, size)):
            if member.kind == "file" and wanted(member.name):
                data = member.read(member.size)
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from specdoctor.errors import InputError

BLOCK = 512
CHUNK = 1 << 20
# GNU long names and pax records are small; anything bigger is hostile.
MAX_META_BYTES = 1 << 16

_KINDS = {
    b"0": "file", b"\0": "file", b"7": "file",
    b"1": "hardlink", b"2": "symlink",
    b"3": "device", b"4": "device", b"6": "fifo",
    b"5": "dir",
}


class ByteSource(Protocol):
    """What the tar parser reads from: a byte stream that can skip forward."""

    def read(self, n: int) -> bytes: ...

    def skip(self, n: int) -> None: ...


class FileSection:
    """Bytes [start, start+size) of an open file, read with pread: seeks are free.

    Small reads (tar headers, pax records, small files) are served from a read-ahead
    window, so a run of small members costs one system call instead of three each.
    """

    AHEAD = 1 << 16

    def __init__(self, fd: int, start: int, size: int) -> None:
        self.fd, self.start, self.size, self.pos = fd, start, size, 0
        self._buf = b""
        self._buf_at = 0  # section offset of _buf[0]

    def read(self, n: int) -> bytes:
        n = max(0, min(n, self.size - self.pos))
        if not n:
            return b""
        off = self.pos - self._buf_at
        if 0 <= off and off + n <= len(self._buf):
            out = self._buf[off:off + n]
        elif n >= self.AHEAD:
            out = os.pread(self.fd, n, self.start + self.pos)
        else:
            want = min(self.AHEAD, self.size - self.pos)
            self._buf = os.pread(self.fd, want, self.start + self.pos)
            self._buf_at = self.pos
            out = self._buf[:n]
        self.pos += len(out)
        return out

    def skip(self, n: int) -> None:
        self.pos = min(self.size, self.pos + n)

    def peek(self, n: int) -> bytes:
        return os.pread(self.fd, min(n, self.size - self.pos), self.start + self.pos)


class StreamSource:
    """A forward-only byte stream (a pipe, a decompressor); skipping means reading."""

    def __init__(self, stream: BinaryIO | "_Readable") -> None:
        self.stream = stream
        self.buf = b""

    def read(self, n: int) -> bytes:
        parts, have = [self.buf[:n]], len(self.buf[:n])
        self.buf = self.buf[n:]
        while have < n:
            chunk = self.stream.read(max(n - have, CHUNK))
            if not chunk:
                break
            take = n - have
            parts.append(chunk[:take])
            self.buf = chunk[take:]
            have += min(take, len(chunk))
        return b"".join(parts)

    def skip(self, n: int) -> None:
        drop = min(n, len(self.buf))
        self.buf = self.buf[drop:]
        n -= drop
        while n > 0:
            chunk = self.stream.read(min(n, CHUNK))
            if not chunk:
                return
            n -= len(chunk)


class _Readable(Protocol):
    def read(self, n: int) -> bytes: ...


class GzipStream:
    """gzip (possibly several concatenated members) decompressed from a ByteSource."""

    def __init__(self, src: ByteSource) -> None:
        self.src = src
        self.dec = zlib.decompressobj(wbits=31)

    def read(self, n: int) -> bytes:
        while True:
            if self.dec.unconsumed_tail:
                return self.dec.decompress(self.dec.unconsumed_tail, n)
            if self.dec.eof:
                rest = self.dec.unused_data
                if not rest:
                    rest = self.src.read(CHUNK)
                    if not rest:
                        return b""
                self.dec = zlib.decompressobj(wbits=31)
                out = self.dec.decompress(rest, n)
            else:
                data = self.src.read(CHUNK)
                if not data:
                    return b""
                out = self.dec.decompress(data, n)
            if out:
                return out


class _ZstdFile:
    """The file-like object zstandard's stream_reader wants, over a ByteSource."""

    def __init__(self, src: ByteSource) -> None:
        self.src = src

    def read(self, n: int = -1) -> bytes:
        return self.src.read(CHUNK if n is None or n < 0 else n)


GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def open_layer(section: FileSection, what: str) -> ByteSource:
    """A layer blob as tar bytes: plain, gzip or zstd, recognised by magic bytes."""
    head = section.peek(262 + 8)
    if head.startswith(GZIP_MAGIC):
        return StreamSource(GzipStream(section))
    if head.startswith(ZSTD_MAGIC):
        try:
            import zstandard
        except ImportError as exc:
            raise InputError(
                f"{what} is zstd-compressed and the zstandard module is not installed",
                "pip install 'specdoctor[recon]' (or: pip install zstandard)",
            ) from exc
        reader = zstandard.ZstdDecompressor().stream_reader(
            _ZstdFile(section), read_size=CHUNK, read_across_frames=True
        )
        return StreamSource(reader)
    if head[:3] == b"BZh" or head.startswith(b"\xfd7zXZ"):
        raise InputError(f"{what} is bzip2/xz-compressed, which image layers do not use",
                         "re-export the image with `docker save` or as an OCI layout")
    if (len(head) >= 262 and head[257:262] == b"ustar") or _is_v7_header(head[:BLOCK]):
        return section
    if not head:
        return section  # an empty layer is an empty tar
    raise InputError(f"{what} is neither a tar nor a gzip/zstd-compressed tar",
                     "pass an image archive from `docker save` or an OCI image layout")


def _is_v7_header(block: bytes) -> bool:
    return len(block) == BLOCK and _checksum_ok(block)


@dataclass(slots=True)
class Member:
    """One tar entry. `read` returns body bytes until `size` is consumed."""

    name: str
    kind: str  # file, dir, symlink, hardlink, device, fifo, other
    size: int
    linkname: str
    _src: ByteSource
    _left: int

    def read(self, n: int = CHUNK) -> bytes:
        data = self._src.read(min(n, self._left))
        self._left -= len(data)
        if not data and self._left:
            raise InputError(f"archive truncated inside {self.name!r}",
                             "the file is incomplete; copy or save it again")
        return data


_META = (b"L", b"K", b"x", b"g")
_ZERO = b"\0" * BLOCK


def iter_members(src: ByteSource, what: str = "archive") -> Iterator[Member]:
    """Yield each member; whatever the consumer leaves unread is skipped afterwards."""
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] = {}
    first = True
    read = src.read
    while True:  # one pass per header: this loop is the cost of reading an image
        hdr = read(BLOCK)
        if len(hdr) < BLOCK:
            if hdr.strip(b"\0"):
                raise InputError(f"{what} ends inside a tar header", "the file is truncated")
            return
        if hdr == _ZERO:
            return
        # Checksums cost a sum over 512 bytes per member; a ustar magic is as good a
        # sign of a sane header, so only magic-less (v7) headers and the first are summed.
        if (first or hdr[257:262] != b"ustar") and not _checksum_ok(hdr):
            raise InputError(f"{what}: bad tar header checksum",
                             "the file is not a tar archive, or it is corrupt")
        first = False
        flag = hdr[156:157]
        try:  # the common case: 11 octal digits and a NUL or space
            size = int(hdr[124:135], 8) if hdr[135] in (0, 32) else _number(hdr[124:136], what)
        except ValueError:
            size = _number(hdr[124:136], what)
        if flag in _META:
            if size > MAX_META_BYTES:
                raise InputError(f"{what}: a tar metadata record of {size} bytes",
                                 "the archive is malformed or hostile; refusing it")
            body = read((size + BLOCK - 1) // BLOCK * BLOCK)[:size]
            if flag == b"x":
                pax = _parse_pax(body, what)
            elif flag == b"L":
                long_name = _text(body.split(b"\0", 1)[0])
            elif flag == b"K":
                long_link = _text(body.split(b"\0", 1)[0])
            continue  # global pax headers ('g') carry nothing we use
        link = ""
        if pax:
            if "size" in pax:
                size = _pax_int(pax["size"], what)
            name = pax.get("path") or long_name or _header_name(hdr)
            link = pax.get("linkpath", "")
            pax = {}
        else:
            name = long_name or _header_name(hdr)
        if flag in (b"1", b"2") and not link:
            link = long_link or _text(hdr[157:257].split(b"\0", 1)[0])
        long_name = long_link = None
        kind = _KINDS.get(flag, "other")
        if kind == "file" or kind == "other":
            padded = (size + BLOCK - 1) // BLOCK * BLOCK
        else:
            # Links, directories and devices have no body even when the size field
            # says otherwise (what GNU tar and tarfile assume too).
            size = padded = 0
        member = Member(name, kind, size, link, src, size)
        yield member
        src.skip(member._left + (padded - size))


def _header_name(hdr: bytes) -> str:
    name = hdr[0:100].split(b"\0", 1)[0]
    if hdr[257:262] == b"ustar":
        prefix = hdr[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return _text(name)


def _checksum_ok(hdr: bytes) -> bool:
    try:
        stored = int(hdr[148:156].replace(b"\0", b" ").strip() or b"-1", 8)
    except ValueError:
        return False
    unsigned = sum(hdr[:148]) + 8 * 32 + sum(hdr[156:])
    return stored == unsigned


def _number(field: bytes, what: str) -> int:
    if field and field[0] & 0x80:  # GNU base-256 for sizes >= 8 GiB
        value = int.from_bytes(field[1:], "big")
        if field[0] & 0x40:
            raise InputError(f"{what}: negative size in a tar header", "the archive is corrupt")
        return value
    text = field.replace(b"\0", b" ").strip()
    try:
        return int(text, 8) if text else 0
    except ValueError as exc:
        raise InputError(f"{what}: unreadable size field {field!r} in a tar header",
                         "the archive is corrupt") from exc


def _pax_int(value: str, what: str) -> int:
    try:
        n = int(value)
    except ValueError as exc:
        raise InputError(f"{what}: unreadable pax size {value!r}", "the archive is corrupt") from exc
    if n < 0:
        raise InputError(f"{what}: negative pax size", "the archive is corrupt")
    return n


_PAX_KEYS = (b"path", b"linkpath", b"size")


def _parse_pax(body: bytes, what: str) -> dict[str, str]:
    """The pax records this reader uses (path, linkpath, size); others are skipped."""
    out: dict[str, str] = {}
    pos, end = 0, len(body)
    while pos < end and body[pos] != 0:
        space = body.find(b" ", pos, pos + 24)
        try:
            length = int(body[pos:space]) if space > pos else 0
        except ValueError:
            length = 0
        if length <= 0 or pos + length > end:
            raise InputError(f"{what}: malformed pax record", "the archive is corrupt")
        eq = body.find(b"=", space + 1, pos + length)
        key = body[space + 1:eq] if eq > 0 else b""
        if key in _PAX_KEYS:
            out[key.decode()] = _text(body[eq + 1:pos + length - 1])
        pos += length
    return out


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
