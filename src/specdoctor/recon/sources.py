"""Where source comes from: image archives, OCI layouts, wheels, pip specs, directories, Docker.

`open_source(ref)` recognises the kind and returns an `OpenedSource`: metadata
for the manifest, and `layers()`, which yields the source's file entries layer
by layer (a wheel or a directory is one layer). Entries share one shape
(`name`, `kind`, `size`, `linkname`, `read(n)`), whatever they come from.

    SOURCE                      kind
    image.tar (docker save)     docker-archive
    image.tar (OCI layout)      oci-archive
    dir with oci-layout         oci-dir
    x.whl                       wheel
    pip:vllm==0.10.0            pip (downloaded with `pip download --no-deps`)
    any other directory         directory (site-packages, a checkout)
    docker://IMAGE              docker (create, export, remove; never started)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from specdoctor.errors import InputError
from specdoctor.recon.image import ImageArchive, is_oci_dir
from specdoctor.recon.picks import Picker
from specdoctor.recon.tarstream import StreamSource, iter_members

if TYPE_CHECKING:
    import subprocess
    import zipfile

# zipfile, subprocess and tempfile are imported where used: an image extraction
# needs none of them, and start-up time counts against reading the archive.


class Entry(Protocol):
    name: str
    kind: str
    size: int
    linkname: str

    def read(self, n: int = ...) -> bytes: ...


@dataclass
class SourceInfo:
    kind: str
    ref: str
    digest: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class OpenedSource(Protocol):
    info: SourceInfo

    def layers(self, picker: Picker) -> Iterator[tuple[str, Iterator[Entry], str]]: ...

    def close(self) -> None: ...


@contextlib.contextmanager
def open_source(ref: str, image: str | None = None, platform: str | None = None) -> Iterator[OpenedSource]:
    src: OpenedSource
    if ref.startswith("docker://"):
        src = DockerEngineSource(ref[len("docker://"):])
    elif ref.startswith("pip:"):
        src = PipSource(ref[len("pip:"):])
    else:
        path = Path(ref).expanduser()
        if not path.exists():
            looks_like_spec = "==" in ref or (">=" in ref) or (os.sep not in ref and "." not in ref)
            hint = f"to download it, write pip:{ref}" if looks_like_spec else \
                "pass an image .tar, an OCI layout, a .whl, pip:SPEC, docker://IMAGE or a directory"
            raise InputError(f"{ref} does not exist", hint)
        if path.is_dir():
            src = ImageSource(path, image, platform) if is_oci_dir(path) else DirectorySource(path)
        elif path.suffix == ".whl" or _is_zip(path):
            src = WheelSource(path)
        else:
            src = ImageSource(path, image, platform)
    try:
        yield src
    finally:
        src.close()


# -- images ----------------------------------------------------------------------------


class ImageSource:
    def __init__(self, path: Path, image: str | None, platform: str | None) -> None:
        self.archive = ImageArchive(path, image, platform)
        i = self.archive.info
        self.info = SourceInfo(
            kind=i.kind, ref=str(path), digest=i.image_id,
            details={"manifest_digest": i.manifest_digest, "repo_tags": i.repo_tags,
                     "platform": i.platform, "layers": i.layers},
        )

    def layers(self, picker: Picker) -> Iterator[tuple[str, Iterator[Entry], str]]:
        for layer_id, data, label in self.archive.layers():
            yield layer_id, iter_members(data, label), label

    def close(self) -> None:
        self.archive.close()


# -- wheels ----------------------------------------------------------------------------


class _ZipEntry:
    def __init__(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        self.name = info.filename
        mode = info.external_attr >> 16
        if info.is_dir():
            self.kind = "dir"
        elif stat.S_ISLNK(mode):
            self.kind = "symlink"
        elif mode and not stat.S_ISREG(mode) and stat.S_IFMT(mode):
            self.kind = "other"
        else:
            self.kind = "file"
        self.size = info.file_size
        self.linkname = ""
        self._zf, self._info = zf, info
        self._fh: Any = None

    def read(self, n: int = 1 << 20) -> bytes:
        if self._fh is None:
            self._fh = self._zf.open(self._info)
        return self._fh.read(n)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class WheelSource:
    def __init__(self, path: Path, ref: str | None = None, kind: str = "wheel",
                 extra: dict[str, Any] | None = None) -> None:
        import zipfile

        try:
            self.zf = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise InputError(f"{path.name} is not a valid wheel (zip) file",
                             "download it again, or pass an image archive or directory") from exc
        self.info = SourceInfo(kind=kind, ref=ref or str(path), digest="sha256:" + _sha256_file(path),
                               details={"file": path.name, **(extra or {})})

    def layers(self, picker: Picker) -> Iterator[tuple[str, Iterator[Entry], str]]:
        yield "wheel", self._entries(), self.info.details["file"]

    def _entries(self) -> Iterator[Entry]:
        for info in self.zf.infolist():
            entry = _ZipEntry(self.zf, info)
            try:
                yield entry
            finally:
                entry.close()

    def close(self) -> None:
        self.zf.close()


class PipSource(WheelSource):
    """`pip download --no-deps SPEC` into a temporary directory, then read the wheel."""

    def __init__(self, spec: str) -> None:
        import subprocess
        import sys
        import tempfile

        self.tmp = tempfile.TemporaryDirectory(prefix="specdoctor-pip-")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", self.tmp.name, spec]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = sorted(Path(self.tmp.name).glob("*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            self.tmp.cleanup()
            last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise InputError(f"pip could not download {spec!r}: {last}",
                             "check the spec (name==version) and that PyPI is reachable, "
                             "or pass a downloaded .whl")
        super().__init__(wheels[0], ref=f"pip:{spec}", kind="pip", extra={"spec": spec})

    def close(self) -> None:
        super().close()
        self.tmp.cleanup()


# -- directories -----------------------------------------------------------------------


class _FileEntry:
    def __init__(self, root: Path, rel: str, st: os.stat_result) -> None:
        self.name = rel
        mode = st.st_mode
        self.kind = ("file" if stat.S_ISREG(mode) else "symlink" if stat.S_ISLNK(mode)
                     else "dir" if stat.S_ISDIR(mode) else "fifo" if stat.S_ISFIFO(mode)
                     else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "other")
        self.size = st.st_size if self.kind == "file" else 0
        self.linkname = ""
        self._path = root / rel
        self._fh: Any = None

    def read(self, n: int = 1 << 20) -> bytes:
        if self._fh is None:
            fd = os.open(self._path, os.O_RDONLY | os.O_NOFOLLOW)
            self._fh = os.fdopen(fd, "rb")
        return self._fh.read(n)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class DirectorySource:
    """A site-packages, a venv or a checkout. Symlinks are reported, never followed."""

    def __init__(self, path: Path) -> None:
        self.root = path
        self.info = SourceInfo(kind="directory", ref=str(path))

    def layers(self, picker: Picker) -> Iterator[tuple[str, Iterator[Entry], str]]:
        yield "tree", self._entries(picker), self.root.name or str(self.root)

    def _entries(self, picker: Picker) -> Iterator[Entry]:
        top = picker.top_level_filter([e.name for e in os.scandir(self.root)])
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            rel_dir = os.path.relpath(dirpath, self.root)
            if rel_dir == ".":
                if top is not None:
                    dirnames[:] = [d for d in dirnames if d in top]
                    filenames = [f for f in filenames if f in top]
                rel_dir = ""
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    st = os.lstat(self.root / rel)
                except OSError:  # gone since it was listed (a live tree: /proc, a build)
                    continue
                entry = _FileEntry(self.root, rel, st)
                try:
                    yield entry
                finally:
                    entry.close()

    def close(self) -> None:
        pass


# -- a Docker engine -------------------------------------------------------------------


class DockerEngineSource:
    """`docker create` (never started), `docker export` streamed, `docker rm`."""

    def __init__(self, image: str) -> None:
        if not image:
            raise InputError("docker:// needs an image name", "write docker://IMAGE[:TAG]")
        import shutil

        self.image = image
        self.docker = shutil.which("docker")
        if self.docker is None:
            raise InputError("docker:// needs the docker CLI, which is not installed",
                             f"on a machine with Docker run `docker save {image} -o image.tar` "
                             "and pass image.tar")
        probe = self._run("version", "--format", "{{.Server.Version}}", timeout=30)
        if probe.returncode != 0 or not probe.stdout.strip():
            why = (probe.stderr.strip().splitlines() or ["no answer"])[0]
            raise InputError(f"no Docker engine answers ({why})",
                             f"start the Docker daemon, or run `docker save {image} -o image.tar` "
                             "where one runs and pass image.tar")
        inspect = self._run("image", "inspect", "--format", "{{.Id}}", image, timeout=60)
        if inspect.returncode != 0:
            raise InputError(f"Docker has no image {image!r}",
                             f"docker pull {image} first (recon never pulls or starts anything)")
        self.cid: str | None = None
        self.info = SourceInfo(kind="docker", ref=f"docker://{image}",
                               digest=inspect.stdout.strip() or None)

    def _run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        import subprocess

        assert self.docker is not None
        try:
            return subprocess.run([self.docker, *args], capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise InputError(f"`docker {args[0]}` did not answer in {timeout:.0f} s",
                             "check that the Docker daemon is healthy") from exc

    def layers(self, picker: Picker) -> Iterator[tuple[str, Iterator[Entry], str]]:
        created = self._run("create", self.image, timeout=120)
        if created.returncode != 0:
            raise InputError(f"docker create {self.image} failed: {created.stderr.strip()[:200]}",
                             "check the image name")
        self.cid = created.stdout.strip()
        assert self.docker is not None
        import subprocess

        proc = subprocess.Popen([self.docker, "export", self.cid], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            # The export is the container's merged filesystem: one layer, no whiteouts.
            yield "export", iter_members(StreamSource(proc.stdout), f"docker export {self.image}"), \
                f"container filesystem of {self.image}"
        finally:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        if self.cid:
            self._run("rm", self.cid, timeout=60)
            self.cid = None


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
