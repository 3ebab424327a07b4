"""Build image archives for tests: docker-archive and OCI layouts, benign or hostile.

Layers are real tars made with `tarfile`; file contents come from the installed
vLLM where a test wants real code (see `real_vllm_file`).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

SITE = "usr/local/lib/python3.12/dist-packages"


def real_vllm_root() -> Path | None:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def real_vllm_file(rel: str) -> bytes:
    """A file of the installed vllm by package path (`vllm/v1/...`)."""
    root = real_vllm_root()
    assert root is not None
    return (root.parent / rel).read_bytes()


@dataclass
class E:
    """One layer entry: kind is file, dir, symlink, hardlink, chr, fifo."""

    name: str
    data: bytes = b""
    kind: str = "file"
    link: str = ""


def layer_tar(entries: list[E], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for e in entries:
            ti = tarfile.TarInfo(e.name)
            ti.mode = 0o644
            if e.kind == "file":
                ti.size = len(e.data)
                tf.addfile(ti, io.BytesIO(e.data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                       "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE,
                       "fifo": tarfile.FIFOTYPE}[e.kind]
            ti.linkname = e.link
            tf.addfile(ti)
    return buf.getvalue()


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def docker_archive(path: Path, layers: list[bytes], tags: tuple[str, ...] = ("test/vllm:1",),
                   legacy_names: bool = False) -> str:
    """Write a `docker save`-style tar; returns the image id (sha256 of the config)."""
    diff_ids = [f"sha256:{sha(layer)}" for layer in layers]
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    cid = sha(config)
    names = [f"{sha(layer)}/layer.tar" if legacy_names else f"blobs/sha256/{sha(layer)}"
             for layer in layers]
    config_name = f"{cid}.json" if legacy_names else f"blobs/sha256/{cid}"
    manifest = [{"Config": config_name, "RepoTags": list(tags), "Layers": names}]
    with tarfile.open(path, "w") as tf:
        # Layers first and manifest last, as docker writes them: the reader must index.
        for name, layer in zip(names, layers, strict=True):
            _add(tf, name, layer)
        _add(tf, config_name, config)
        _add(tf, "manifest.json", json.dumps(manifest).encode())
    return f"sha256:{cid}"


def compress(layer: bytes, how: str | None) -> tuple[bytes, str]:
    if how == "gzip":
        return gzip.compress(layer), "application/vnd.oci.image.layer.v1.tar+gzip"
    if how == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(layer), \
            "application/vnd.oci.image.layer.v1.tar+zstd"
    return layer, "application/vnd.oci.image.layer.v1.tar"


def oci_blobs(layers: list[bytes], how: str | None, ref: str = "test/vllm:1",
              platforms: tuple[str, ...] = ()) -> tuple[dict[str, bytes], dict[str, object]]:
    """Blobs and index.json of an OCI layout; with `platforms`, a nested multi-arch index."""
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        blobs[sha(data)] = data
        return f"sha256:{sha(data)}"

    def one_manifest(arch: str) -> dict[str, object]:
        descs = []
        for layer in layers:
            data, media = compress(layer, how)
            descs.append({"mediaType": media, "digest": put(data), "size": len(data)})
        config = json.dumps({"architecture": arch, "os": "linux",
                             "rootfs": {"type": "layers",
                                        "diff_ids": [f"sha256:{sha(x)}" for x in layers]}}).encode()
        manifest = json.dumps({"schemaVersion": 2,
                               "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                          "digest": put(config), "size": len(config)},
                               "layers": descs}).encode()
        return {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": put(manifest), "size": len(manifest),
                "platform": {"os": "linux", "architecture": arch}}

    if platforms:
        nested = json.dumps({"schemaVersion": 2,
                             "mediaType": "application/vnd.oci.image.index.v1+json",
                             "manifests": [one_manifest(a) for a in platforms]}).encode()
        top = {"mediaType": "application/vnd.oci.image.index.v1+json", "digest": put(nested),
               "size": len(nested), "annotations": {"org.opencontainers.image.ref.name": ref}}
    else:
        top = one_manifest("amd64")
        top["annotations"] = {"org.opencontainers.image.ref.name": ref}
    index = {"schemaVersion": 2, "manifests": [top]}
    return blobs, index


def oci_dir(path: Path, layers: list[bytes], how: str | None = "gzip", **kw: object) -> None:
    blobs, index = oci_blobs(layers, how, **kw)  # type: ignore[arg-type]
    (path / "blobs" / "sha256").mkdir(parents=True)
    for digest, data in blobs.items():
        (path / "blobs" / "sha256" / digest).write_bytes(data)
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (path / "index.json").write_text(json.dumps(index))


def oci_tar(path: Path, layers: list[bytes], how: str | None = "zstd", **kw: object) -> None:
    blobs, index = oci_blobs(layers, how, **kw)  # type: ignore[arg-type]
    with tarfile.open(path, "w") as tf:
        _add(tf, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _add(tf, "index.json", json.dumps(index).encode())
        for digest, data in blobs.items():
            _add(tf, f"blobs/sha256/{digest}", data)


def wheel(path: Path, files: dict[str, bytes]) -> None:
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nlong description\n".encode()
