"""Report writers never write through a symlink they did not make: a link already in the
output folder is replaced by the file, and what it pointed at is untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.report.files import write_file
from tests.bench.stream_server import running
from tests.conftest import run_cli


def test_a_symlink_in_the_folder_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").symlink_to(victim)
    (out / "dangling.md").symlink_to(tmp_path / "created-through-the-link")
    assert write_file(out / "report.md", "# report\n") == out / "report.md"
    write_file(out / "dangling.md", b"bytes\n")
    assert victim.read_text() == "untouched"
    assert not (tmp_path / "created-through-the-link").exists()
    for name, text in (("report.md", "# report\n"), ("dangling.md", "bytes\n")):
        assert not (out / name).is_symlink() and (out / name).read_text() == text
    assert sorted(p.name for p in out.iterdir()) == ["dangling.md", "report.md"]  # no temp left


def test_a_directory_in_the_way_is_refused(tmp_path):
    (tmp_path / "report.md").mkdir()
    with pytest.raises(InputError, match="report.md"):
        write_file(tmp_path / "report.md", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_report_command_does_not_write_through_links_in_its_folder(tmp_path):
    db = tmp_path / "s.db"
    with running("--k", "2", "--pattern", "2,1", "--step-ms", "1") as url:
        proc = run_cli("bench", "--url", url, "-n", "2", "--max-tokens", "8", "--suite", "code",
                       "--sampling", "greedy", "-c", "1", "--no-report", "--db", str(db),
                       "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    out = tmp_path / "reports"
    out.mkdir()
    victims = {}
    for name in ("report.md", "report.html"):
        victims[name] = tmp_path / f"victim-{name}"
        victims[name].write_text("untouched")
        (out / name).symlink_to(victims[name])
    proc = run_cli("report", str(run_id), "-o", str(out), "--db", str(db), "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name, victim in victims.items():
        assert victim.read_text() == "untouched", name
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 100
    assert not [p for p in os.listdir(out) if p.startswith(".")]
