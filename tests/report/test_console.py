"""Progress of long builds reaches stderr while it runs, and only then."""

from __future__ import annotations

import logging

from specdoctor.report.console import build_progress


def test_build_progress_shows_lab_info_lines_on_stderr_while_active(capsys):
    log = logging.getLogger("specdoctor.lab.drafters.cache")
    with build_progress():
        log.info("building %s (first use; cached afterwards)", "dflash-trained-0123")
        logging.getLogger("specdoctor.lab.train").info("target step %d/%d loss %.3f", 100, 1400, 2.5)
        logging.getLogger("specdoctor.lab").debug("not shown")
    log.info("after the block: not shown")
    err = capsys.readouterr().err
    assert "building dflash-trained-0123 (first use; cached afterwards)" in err
    assert "target step 100/1400 loss 2.500" in err
    assert "not shown" not in err
    assert logging.getLogger("specdoctor.lab").handlers == []
