"""Build-once directories: complete or absent, and the first finished copy wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.lab.atomic import build_dir


def test_builds_in_a_sibling_and_renames_into_place(tmp_path: Path):
    out = tmp_path / "model-abc"
    seen: list[Path] = []

    def fill(tmp: Path) -> int:
        seen.append(tmp)
        assert tmp != out and tmp.parent == out.parent and not out.exists()
        (tmp / "weights").write_text("w")
        return 7

    assert build_dir(out, fill) == 7
    assert (out / "weights").read_text() == "w"
    assert not seen[0].exists()


def test_a_failed_build_leaves_nothing(tmp_path: Path):
    out = tmp_path / "model-abc"

    def fill(tmp: Path) -> None:
        (tmp / "half").write_text("written")
        raise RuntimeError("training diverged")

    with pytest.raises(RuntimeError, match="diverged"):
        build_dir(out, fill)
    assert list(tmp_path.iterdir()) == []


def test_a_copy_built_meanwhile_by_another_process_is_kept(tmp_path: Path):
    out = tmp_path / "model-abc"

    def fill(tmp: Path) -> None:
        out.mkdir()  # the other process finished first
        (out / "weights").write_text("theirs")
        (tmp / "weights").write_text("ours")

    build_dir(out, fill)
    assert (out / "weights").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["model-abc"]


def test_start_from_copies_the_initial_directory(tmp_path: Path):
    init = tmp_path / "init"
    init.mkdir()
    (init / "config.json").write_text("{}")
    out = tmp_path / "trained"

    def fill(tmp: Path) -> None:
        assert (tmp / "config.json").read_text() == "{}"
        (tmp / "config.json").write_text('{"trained": true}')

    build_dir(out, fill, start_from=init)
    assert (init / "config.json").read_text() == "{}"
    assert (out / "config.json").read_text() == '{"trained": true}'
