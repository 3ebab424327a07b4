"""Names from untrusted inputs reach the terminal with their control characters shown, never
sent: a name holding ESC [ 2 J prints as ``\\x1b[2J`` and clears nothing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from specdoctor.report.table import ledger_table, print_notes
from specdoctor.safe_text import markup, visible

sys.path.insert(0, str(Path(__file__).resolve().parent / "recon"))
from imagebuild import metadata, wheel  # noqa: E402

CLEAR = "\x1b[2J"
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))] + ["\u202e", "\u2066"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


def test_visible_shows_every_control_character():
    assert visible(f"case{CLEAR}x") == "case\\x1b[2Jx"
    assert visible("a\u009b2Jb") == "a\\x9b2Jb" and visible("\u202eevil") == "\\u202eevil"
    assert visible("tab\tkept") == "tab\tkept" and visible("two\nlines") == "two\\x0alines"
    assert visible("two\nlines", keep_newline=True) == "two\nlines"
    for c in CONTROLS:
        if c not in "\t":
            assert c not in visible(f"x{c}y"), repr(c)
    assert visible("plain é 漢字 [b]") == "plain é 漢字 [b]"
    assert markup("[red]x\x1b") == "\\[red]x\\x1b"


def test_notes_and_tables_print_no_escape():
    buf = io.StringIO()
    con = Console(file=buf, width=200, force_terminal=False)
    print_notes(con, [f"suite case {CLEAR} not found"])
    con.print(ledger_table([{"id": f"h{CLEAR}", "verdict": f"v{CLEAR}",
                             "evidence": [f"e{CLEAR}"], "experiment": f"x{CLEAR}"}]))
    out = buf.getvalue()
    assert "\x1b" not in out and out.count("\\x1b[2J") == 5, out


def test_archive_member_names_are_shown_not_sent(tmp_path):
    wheel(tmp_path / "vllm-0.1.0-py3-none-any.whl",
          {f"vllm/v1/spec_decode/a{CLEAR}b.py": b"x = 1\n",
           "vllm-0.1.0.dist-info/METADATA": metadata("vllm", "0.1.0")})
    r = _cli("recon", "extract", str(tmp_path / "vllm-0.1.0-py3-none-any.whl"),
             "-o", str(tmp_path / "snap"))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "a\\x1b[2Jb.py" in r.stdout, r.stdout


def test_probe_names_from_a_log_are_shown_not_sent(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(f'INFO start\n[probe] na{CLEAR}me {{"value": "{CLEAR.replace(chr(27), "")}"}}\n')
    r = _cli("probe", "lines", str(log))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "na\\x1b[2Jme" in r.stdout, r.stdout


def test_suite_case_names_are_shown_not_sent(tmp_path):
    pytest.importorskip("torch")
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps([{"name": f"c{CLEAR}x", "seqs": [[37, 8]]}]))
    r = _cli("kernels", "check", "--impl", "sdpa", "--suite", str(suite))
    assert r.returncode in (0, 1), r.stderr  # 1: one case does not exercise the control
    assert "\x1b" not in r.stdout + r.stderr and "c\\x1b[2Jx" in r.stdout, r.stdout
