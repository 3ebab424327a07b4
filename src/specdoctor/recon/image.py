"""Container images read as files: docker-archive (`docker save`) and OCI image layouts.

No container engine is involved. The outer tar is indexed by its headers alone
(seeking over every body), the manifest names the layers in order, and each
layer is then read as a tar straight out of its byte range of the outer file
(or out of its blob file in an OCI directory), decompressing gzip/zstd on the
fly. See extract.py for how layers are applied.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as _platform
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.errors import InputError
from specdoctor.recon.tarstream import (
    GZIP_MAGIC,
    ZSTD_MAGIC,
    ByteSource,
    FileSection,
    iter_members,
    open_layer,
)

_DIGEST = re.compile(r"^(sha256|sha512):([a-f0-9]{64}|[a-f0-9]{128})$")
MAX_OUTER_MEMBERS = 1_000_000
MAX_JSON_BYTES = 16 << 20
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
                "application/vnd.docker.distribution.manifest.list.v2+json")


@dataclass
class ImageInfo:
    kind: str  # docker-archive | oci-archive | oci-dir
    image_id: str | None = None  # sha256 of the config: what `docker images` shows
    manifest_digest: str | None = None
    repo_tags: list[str] = field(default_factory=list)
    platform: str | None = None
    layers: list[str] = field(default_factory=list)


def is_oci_dir(path: Path) -> bool:
    return path.is_dir() and (path / "oci-layout").is_file() and (path / "index.json").is_file()


class ImageArchive:
    """An image on disk. `layers()` yields (layer id, tar bytes) bottom to top."""

    def __init__(self, path: Path, image: str | None = None, platform: str | None = None) -> None:
        self.path = path
        self.want_image = image
        self.want_platform = platform
        self._fd: int | None = None
        self._members: dict[str, tuple[int, int]] = {}
        if path.is_dir():
            self.kind = "oci-dir"
        else:
            self._fd = os.open(path, os.O_RDONLY)
            self._index_outer()
        self.info, self._layer_refs = self._read_manifest()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ImageArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- outer container --------------------------------------------------------------

    def _index_outer(self) -> None:
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        section = FileSection(self._fd, 0, size)
        head = section.peek(4)
        if head.startswith(GZIP_MAGIC) or head.startswith(ZSTD_MAGIC):
            raise InputError(f"{self.path.name} is a compressed archive",
                             "decompress it first (gunzip / zstd -d), then pass the .tar")
        for n, member in enumerate(iter_members(section, self.path.name)):
            if n > MAX_OUTER_MEMBERS:
                raise InputError(f"{self.path.name} has more than {MAX_OUTER_MEMBERS} entries",
                                 "this is not an image archive")
            if member.kind == "file":
                name = member.name[2:] if member.name.startswith("./") else member.name
                self._members[name] = (section.pos, member.size)
        names = self._members
        if "manifest.json" in names:
            self.kind = "docker-archive"
        elif "index.json" in names and "oci-layout" in names:
            self.kind = "oci-archive"
        else:
            raise InputError(f"{self.path.name} is a tar but not an image archive "
                             "(no manifest.json or index.json + oci-layout)",
                             "pass the output of `docker save`, an OCI layout, a wheel "
                             "or a site-packages directory")

    def _blob_section(self, name: str) -> FileSection:
        if self.kind == "oci-dir":
            path = self.path / name
            if not path.is_file() or path.is_symlink():
                raise InputError(f"{self.path.name}: blob {name} is missing",
                                 "the OCI layout is incomplete; export it again")
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            return _OwnedSection(fd, 0, os.fstat(fd).st_size)
        found = self._members.get(name)
        if found is None:
            raise InputError(f"{self.path.name}: {name} is named in the manifest but absent",
                             "the archive is incomplete; save it again")
        assert self._fd is not None
        return FileSection(self._fd, found[0], found[1])

    def _json(self, name: str) -> Any:
        section = self._blob_section(name)
        if section.size > MAX_JSON_BYTES:
            raise InputError(f"{self.path.name}: {name} is {section.size} bytes", "not an image manifest")
        raw = section.read(section.size)
        _close(section)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise InputError(f"{self.path.name}: {name} is not valid JSON", "the archive is corrupt") from exc

    # -- manifests ----------------------------------------------------------------------

    def _read_manifest(self) -> tuple[ImageInfo, list[tuple[str, str]]]:
        if self.kind == "docker-archive":
            return self._docker_manifest()
        return self._oci_manifest()

    def _docker_manifest(self) -> tuple[ImageInfo, list[tuple[str, str]]]:
        entries = self._json("manifest.json")
        if not isinstance(entries, list) or not entries:
            raise InputError(f"{self.path.name}: manifest.json lists no image", "save the image again")
        entry = _choose(entries, self.want_image, lambda e: e.get("RepoTags") or [], self.path.name)
        config_name = str(entry.get("Config", ""))
        config_raw = self._raw(config_name)
        config = json.loads(config_raw)
        diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
        layer_names = [str(x) for x in entry.get("Layers") or []]
        ids = [diff_ids[i] if i < len(diff_ids) else _blob_id(n) for i, n in enumerate(layer_names)]
        info = ImageInfo(
            kind="docker-archive",
            image_id="sha256:" + hashlib.sha256(config_raw).hexdigest(),
            repo_tags=list(entry.get("RepoTags") or []),
            platform=_config_platform(config),
            layers=ids,
        )
        return info, list(zip(ids, layer_names, strict=True))

    def _oci_manifest(self) -> tuple[ImageInfo, list[tuple[str, str]]]:
        index = self._json("index.json")
        descriptor, tags = self._pick_manifest(index, depth=0)
        manifest = self._json(_blob_path(descriptor["digest"]))
        config_desc = manifest.get("config") or {}
        config = self._json(_blob_path(config_desc.get("digest", ""))) if config_desc else {}
        layers = manifest.get("layers") or []
        digests = [str(layer.get("digest", "")) for layer in layers]
        info = ImageInfo(
            kind=self.kind,
            image_id=config_desc.get("digest"),
            manifest_digest=descriptor["digest"],
            repo_tags=tags,
            platform=_config_platform(config),
            layers=digests,
        )
        return info, [(d, _blob_path(d)) for d in digests]

    def _pick_manifest(self, index: dict[str, Any], depth: int) -> tuple[dict[str, Any], list[str]]:
        if depth > 4:
            raise InputError(f"{self.path.name}: image indexes nested too deep", "the layout is malformed")
        manifests = index.get("manifests") or []
        if not manifests:
            raise InputError(f"{self.path.name}: index.json lists no manifest", "export the image again")

        def names(d: dict[str, Any]) -> list[str]:
            ann = d.get("annotations") or {}
            return [v for k, v in ann.items()
                    if k in ("org.opencontainers.image.ref.name", "io.containerd.image.name")]

        if self.want_image or len(manifests) == 1:
            chosen = _choose(manifests, self.want_image, names, self.path.name)
        else:
            wanted = self.want_platform or _host_platform()
            on_platform = [m for m in manifests if _descriptor_platform(m) == wanted]
            if len(on_platform) != 1:
                listed = ", ".join(_descriptor_platform(m) or "?" for m in manifests)
                raise InputError(f"{self.path.name} holds {len(manifests)} manifests "
                                 f"({listed}), none or several for {wanted}",
                                 "choose one with --platform OS/ARCH or --image NAME")
            chosen = on_platform[0]
        if chosen.get("mediaType") in _INDEX_TYPES:
            nested = self._json(_blob_path(chosen["digest"]))
            desc, tags = self._pick_manifest(nested, depth + 1)
            return desc, tags or names(chosen)
        return chosen, names(chosen)

    def _raw(self, name: str) -> bytes:
        section = self._blob_section(name)
        if section.size > MAX_JSON_BYTES:
            raise InputError(f"{self.path.name}: {name} is too large for an image config", "not an image")
        data = section.read(section.size)
        _close(section)
        return data

    # -- layers -------------------------------------------------------------------------

    def layers(self) -> Iterator[tuple[str, ByteSource, str]]:
        """(layer id, tar bytes, human label) for each layer, bottom first."""
        total = len(self._layer_refs)
        for i, (layer_id, name) in enumerate(self._layer_refs):
            section = self._blob_section(name)
            label = f"layer {i + 1}/{total} ({layer_id[:19]})"
            try:
                yield layer_id, open_layer(section, label), label
            finally:
                _close(section)


class _OwnedSection(FileSection):
    """A section over a file descriptor this module opened (an OCI blob)."""

    def close(self) -> None:
        os.close(self.fd)


def _close(section: FileSection) -> None:
    if isinstance(section, _OwnedSection):
        section.close()


def _blob_path(digest: str) -> str:
    m = _DIGEST.match(digest or "")
    if not m:
        raise InputError(f"malformed blob digest {digest!r} in the image manifest",
                         "the layout is corrupt or hostile; refusing it")
    return f"blobs/{m.group(1)}/{m.group(2)}"


def _blob_id(name: str) -> str:
    parts = name.split("/")
    if len(parts) == 3 and parts[0] == "blobs":
        return f"{parts[1]}:{parts[2]}"
    return name


def _choose(entries: list[Any], want: str | None, names: Any, what: str) -> dict[str, Any]:
    if want:
        hits = [e for e in entries if any(want == n or n.endswith("/" + want) for n in names(e))]
        if len(hits) != 1:
            listed = ", ".join(n for e in entries for n in names(e)) or "untagged images only"
            raise InputError(f"{what}: no single image named {want!r}", f"choose one of: {listed}")
        return hits[0]
    if len(entries) == 1:
        return entries[0]
    listed = ", ".join(n for e in entries for n in names(e)) or "untagged"
    raise InputError(f"{what} holds {len(entries)} images ({listed})", "choose one with --image NAME")


def _descriptor_platform(d: dict[str, Any]) -> str | None:
    p = d.get("platform") or {}
    if not p:
        return None
    out = f"{p.get('os', '?')}/{p.get('architecture', '?')}"
    return out + (f"/{p['variant']}" if p.get("variant") else "")


def _config_platform(config: dict[str, Any]) -> str | None:
    if not isinstance(config, dict) or "architecture" not in config:
        return None
    return f"{config.get('os', '?')}/{config['architecture']}"


def _host_platform() -> str:
    machine = _platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"linux/{arch}"
