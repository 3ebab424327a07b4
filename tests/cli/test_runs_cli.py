"""`specdoctor runs [ID]` on runs recorded from the committed real logs (no server needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
NGRAM = FIX / "lab-ngram-k3" / "server.log"
SGLANG = Path(__file__).resolve().parents[1] / "sources" / "fixtures" / "sglang" / "pr6081_mtp_dp_attention.log"


def _recorded(proc) -> int:
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"recorded as run (\d+) \(show it: specdoctor runs \1\)", proc.stderr)
    assert m, proc.stderr
    return int(m.group(1))


def test_every_stored_run_prints_its_id_table_or_json():
    a = _recorded(run_cli("logs", str(NGRAM), "--windows", "0"))
    b = _recorded(run_cli("logs", str(SGLANG), "--json"))
    c = _recorded(run_cli("metrics", str(FIX / "lab-ngram-k3" / "metrics_3_final.txt")))
    assert (a, b, c) == (1, 2, 3)
    assert json.loads(run_cli("logs", str(SGLANG), "--json").stdout)["run_id"] == 4
    assert "recorded as run" not in run_cli("logs", str(NGRAM), "--no-store").stderr


def test_runs_lists_engine_and_a_readable_target():
    # two servers of different configs: read apart (--by-file), stored as one run of two files
    _recorded(run_cli("logs", str(NGRAM), str(FIX / "lab-draft_model-k4" / "server.log"), "--by-file"))
    _recorded(run_cli("logs", str(SGLANG)))
    r = run_cli("runs", env={"COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    row1 = next(ln for ln in lines if ln.startswith("│ 1 "))
    row2 = next(ln for ln in lines if ln.startswith("│ 2 "))
    assert "vllm" in row1 and "lab-ngram-k3/server.log +1 more" in row1
    assert str(FIX) not in r.stdout  # no absolute paths in the list
    assert "sglang" in row2 and "pr6081_mtp_dp_attention.log" in row2
    listed = json.loads(run_cli("runs", "--json").stdout)["runs"]
    assert [(x["id"], x["engine"]) for x in listed] == [(2, "sglang"), (1, "vllm")]


def test_runs_id_is_a_table_unless_json():
    run_id = _recorded(run_cli("logs", str(SGLANG)))
    r = run_cli("runs", str(run_id), env={"COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert not r.stdout.lstrip().startswith("{")
    assert f"run {run_id} · logs · total" in r.stdout and "sglang" in r.stdout
    assert "2.79" in r.stdout and "SGLang's \"accept len\"" in r.stdout  # per-engine convention
    d = json.loads(run_cli("runs", str(run_id), "--json").stdout)
    assert d["engine"] == "sglang" and round(d["result"]["total"]["mean_acceptance_length"], 2) == 2.79
    r = run_cli("runs", "99")
    assert r.returncode == 2 and "no run 99" in r.stderr and "Traceback" not in r.stderr


def test_hints_keep_the_store_named_with_db(tmp_path):
    """A run recorded into --db PATH is shown with --db PATH: every hint keeps it."""
    db = tmp_path / "my store.sqlite"
    proc = run_cli("logs", str(SGLANG), "--windows", "0", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert f"(show it: specdoctor runs 1 --db '{db}')" in proc.stderr
    shown = run_cli("runs", "1", "--db", str(db))
    assert shown.returncode == 0 and f"specdoctor runs 1 --db '{db}' --json" in shown.stderr
    listed = run_cli("runs", "--db", str(db))
    assert f"show one: specdoctor runs ID --db '{db}'" in listed.stderr
    # and the notes of a stored run are on stderr, its tables on stdout
    assert "note:" in shown.stderr and "note:" not in shown.stdout
