"""Hostile and broken input: nothing escapes the output directory, every refusal is clear."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest
from imagebuild import SITE, E, docker_archive, layer_tar, oci_dir, wheel

from specdoctor.errors import InputError
from specdoctor.recon.extract import extract
from specdoctor.recon.writer import LimitExceeded, Limits

SPEC = "vllm/v1/spec_decode"


def _files_outside(root: Path, out: Path) -> list[Path]:
    return [p for p in root.rglob("*")
            if (p.is_file() or p.is_symlink()) and out not in p.parents and p.name != "img.tar"]


def test_path_escapes_links_and_devices_are_not_written(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    layer = layer_tar([
        E(f"{SITE}/{SPEC}/good.py", b"ok\n"),
        E(f"/{SITE}/{SPEC}/absolute.py", b"abs\n"),
        E(f"{SITE}/{SPEC}/../../../../../../../../victim.txt", b"pwned\n"),
        E(f"../../{SITE}/{SPEC}/dotdot.py", b"pwned\n"),
        E(f"{SITE}/{SPEC}/sym.py", kind="symlink", link=str(victim)),
        E(f"{SITE}/{SPEC}/hard.py", kind="hardlink", link="../../../victim.txt"),
        E(f"{SITE}/{SPEC}/hardabs.py", kind="hardlink", link=str(victim)),
        E(f"{SITE}/{SPEC}/dev.py", kind="chr"),
        E(f"{SITE}/{SPEC}/fifo.py", kind="fifo"),
        # A symlinked directory, then a file "through" it: must land as a plain file.
        E(f"{SITE}/vllm/v1/metrics", kind="symlink", link=str(tmp_path)),
        E(f"{SITE}/vllm/v1/metrics/loggers.py", b"through the link\n"),
    ])
    docker_archive(tmp_path / "img.tar", [layer])
    out = tmp_path / "out"
    snap, _ = extract(str(tmp_path / "img.tar"), out, ["vllm"])
    assert victim.read_text() == "untouched"
    assert _files_outside(tmp_path, out) == [victim]
    assert {f.path for f in snap.files} == {f"{SPEC}/good.py", "vllm/v1/metrics/loggers.py"}
    for p in out.rglob("*"):
        assert not p.is_symlink()
        assert stat.S_ISREG(p.lstat().st_mode) or p.is_dir()
    reasons = {s.path: s.reason for s in snap.skipped}
    assert any("unsafe path" in r for r in reasons.values())
    assert "symlink" in reasons[f"{SITE}/{SPEC}/sym.py"]
    assert "unsafe" in reasons[f"{SITE}/{SPEC}/hard.py"]
    assert "unsafe" in reasons[f"{SITE}/{SPEC}/hardabs.py"]
    assert "device" in reasons[f"{SITE}/{SPEC}/dev.py"]
    assert "fifo" in reasons[f"{SITE}/{SPEC}/fifo.py"]


def test_hardlink_within_picks_is_copied_not_linked(tmp_path):
    layer = layer_tar([
        E(f"{SITE}/{SPEC}/a.py", b"same bytes\n"),
        E(f"{SITE}/{SPEC}/b.py", kind="hardlink", link=f"{SITE}/{SPEC}/a.py"),
        E(f"{SITE}/{SPEC}/c.py", kind="hardlink", link=f"{SITE}/vllm/unpicked.py"),
    ])
    docker_archive(tmp_path / "img.tar", [layer])
    snap, _ = extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"])
    a, b = tmp_path / "out" / SPEC / "a.py", tmp_path / "out" / SPEC / "b.py"
    assert b.read_bytes() == b"same bytes\n"
    assert a.stat().st_ino != b.stat().st_ino
    assert any("not picked" in s.reason for s in snap.skipped)


def test_existing_symlink_in_output_is_not_followed(tmp_path):
    layer = layer_tar([E(f"{SITE}/{SPEC}/a.py", b"x\n")])
    docker_archive(tmp_path / "img.tar", [layer])
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "vllm").symlink_to(elsewhere)
    (out / "manifest.json").write_text(json.dumps({"schema": "specdoctor.snapshot/1", "source": {},
                                                   "files": []}))
    with pytest.raises(InputError, match="not a plain directory"):
        extract(str(tmp_path / "img.tar"), out, ["vllm"])
    assert list(elsewhere.iterdir()) == []


def test_file_count_and_size_limits(tmp_path):
    layer = layer_tar([E(f"{SITE}/{SPEC}/f{i}.py", b"x" * 100) for i in range(5)])
    docker_archive(tmp_path / "img.tar", [layer])
    with pytest.raises(LimitExceeded, match="more than 3 files"):
        extract(str(tmp_path / "img.tar"), tmp_path / "a", ["vllm"], limits=Limits(max_files=3))
    assert not (tmp_path / "a").exists()
    with pytest.raises(LimitExceeded, match="per-file limit"):
        extract(str(tmp_path / "img.tar"), tmp_path / "b", ["vllm"], limits=Limits(max_file_bytes=50))
    with pytest.raises(LimitExceeded, match="grows past 250"):
        extract(str(tmp_path / "img.tar"), tmp_path / "c", ["vllm"],
                limits=Limits(max_total_bytes=250))


def test_zip_bomb_is_stopped_by_the_size_limit(tmp_path):
    whl = tmp_path / "vllm-9-py3-none-any.whl"
    wheel(whl, {f"{SPEC}/bomb.py": b"\0" * (8 << 20)})
    with pytest.raises(LimitExceeded, match="per-file limit"):
        extract(str(whl), tmp_path / "out", ["vllm"], limits=Limits(max_file_bytes=1 << 20))


def test_zip_with_traversal_and_symlink_members(tmp_path):
    whl = tmp_path / "vllm-9-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr(f"{SPEC}/ok.py", b"ok")
        zf.writestr(f"../../{SPEC}/evil.py", b"evil")
        zf.writestr(f"/{SPEC}/abs.py", b"evil")
        link = zipfile.ZipInfo(f"{SPEC}/link.py")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    snap, _ = extract(str(whl), tmp_path / "out", ["vllm"])
    assert [f.path for f in snap.files] == [f"{SPEC}/ok.py"]
    assert not (tmp_path / "out" / SPEC / "link.py").exists()


def test_gzip_bomb_layer_is_stopped_by_the_scan_limit(tmp_path):
    # 64 MiB of zeros compresses to ~64 KiB; the scan limit catches the expansion.
    ti = tarfile.TarInfo("junk.bin")
    ti.size = 64 << 20
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        tf.addfile(ti, io.BytesIO(b"\0" * ti.size))
    oci = tmp_path / "oci"
    oci_dir(oci, [layer_tar([E(f"{SITE}/{SPEC}/a.py", b"x")]), raw.getvalue()], "gzip")
    with pytest.raises(LimitExceeded, match="expands past"):
        extract(str(oci), tmp_path / "out", ["vllm"], limits=Limits(max_scanned_bytes=8 << 20))


def test_malformed_digest_in_oci_index_is_refused(tmp_path):
    oci = tmp_path / "oci"
    oci_dir(oci, [layer_tar([E(f"{SITE}/{SPEC}/a.py", b"x")])], None)
    index = json.loads((oci / "index.json").read_text())
    index["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    (oci / "index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match="malformed blob digest"):
        extract(str(oci), tmp_path / "out", ["vllm"])


def test_manifest_naming_a_missing_layer(tmp_path):
    docker_archive(tmp_path / "img.tar", [layer_tar([E("a", b"x")])])
    raw = tmp_path / "img.tar"
    with tarfile.open(raw) as tf:
        members = {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}
    manifest = json.loads(members["manifest.json"])
    manifest[0]["Layers"].append("blobs/sha256/" + "0" * 64)
    members["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(raw, "w") as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    with pytest.raises(InputError, match="absent"):
        extract(str(raw), tmp_path / "out", ["vllm"])


@pytest.mark.parametrize("content,match", [
    (os.urandom(3000), "checksum|not a tar"),
    (gzip.compress(b"\0" * 2048), "compressed archive"),
    (b"BZh91AY&SY" + b"\0" * 600, "checksum|not a tar"),
])
def test_unsupported_files_get_one_clear_message(tmp_path, content, match):
    f = tmp_path / "thing.tar"
    f.write_bytes(content)
    with pytest.raises(InputError, match=match):
        extract(str(f), tmp_path / "out", ["vllm"])


def test_plain_tar_that_is_not_an_image(tmp_path):
    f = tmp_path / "src.tar"
    f.write_bytes(layer_tar([E("vllm/x.py", b"x")]))
    with pytest.raises(InputError, match="not an image archive"):
        extract(str(f), tmp_path / "out", ["vllm"])


def test_missing_source_suggests_pip(tmp_path):
    with pytest.raises(InputError, match="pip:vllm==0.10.0"):
        extract("vllm==0.10.0", tmp_path / "out", ["vllm"])
