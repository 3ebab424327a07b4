"""The pre-filter that hands only marked lines to Python: grep and the Python scan agree, and
text blocks hold exactly the marked lines, whatever their size."""

import pytest

from specdoctor.sources import scan
from tests.sources.vllm_lines import RECORDED


@pytest.mark.parametrize("log", RECORDED, ids=[p.parent.name for p in RECORDED])
def test_text_blocks_hold_the_marked_lines(tmp_path, log):
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(log.read_bytes().replace(b"\n", b"\r\n") + b"\xff\xfe SpecDecoding metrics: x")
    for path in (log, crlf):
        lines = list(scan.iter_marked_lines(str(path), (b"metrics:",)))
        for size in (64, 1 << 22):
            text = "".join(scan.iter_marked_text(str(path), (b"metrics:",), size))
            got = [(int(n), line.rstrip("\r")) for n, _, line in
                   (s.partition(":") for s in text.split("\n")[:-1])]
            assert got == lines


def test_python_scan_blocks_match_grep(tmp_path, monkeypatch):
    log = RECORDED[0]
    via_grep = "".join(scan.iter_marked_text(str(log), (b"metrics:",)))
    monkeypatch.setattr(scan.shutil, "which", lambda name: None)
    assert "".join(scan.iter_marked_text(str(log), (b"metrics:",))) == via_grep
