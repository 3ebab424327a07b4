"""Bad input never ends in a traceback: one line naming the problem and the fix, non-zero exit."""

from pathlib import Path

import pytest

from tests.conftest import run_cli

DM = Path(__file__).resolve().parent.parent / "fixtures" / "vllm" / "lab-draft_model-k4"


def assert_clean_error(proc, *needles: str, code: int | None = None):
    assert proc.returncode != 0
    if code is not None:
        assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in proc.stderr, proc.stderr


def test_help_lists_every_command():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for cmd in ("logs", "metrics", "measure", "lab", "runs"):
        assert cmd in proc.stdout


def test_logs_missing_file(tmp_path):
    assert_clean_error(run_cli("logs", str(tmp_path / "nope.log")), "no such file", code=2)


def test_logs_not_a_log(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\nworld\n")
    assert_clean_error(run_cli("logs", str(f)), "no speculative-decoding metrics lines", "--engine")


def test_logs_binary_file(tmp_path):
    f = tmp_path / "blob.bin"
    f.write_bytes(b"\x00\x01\x02" * 100)
    assert_clean_error(run_cli("logs", str(f)), "binary")


def test_logs_truncated_lines_are_skipped_and_counted(tmp_path):
    real = (DM / "server.log").read_text().splitlines()
    spec = [i for i, l in enumerate(real) if "SpecDecoding metrics" in l]
    cut = list(real)
    cut[spec[0]] = cut[spec[0]][: cut[spec[0]].index("Accepted:")]  # truncated mid-line
    f = tmp_path / "cut.log"
    f.write_text("\n".join(cut) + "\n")
    proc = run_cli("logs", str(f), "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert out["skipped_lines"]["count"] == 1
    assert out["skipped_lines"]["first"][0].endswith(f"cut.log:{spec[0] + 1}: SpecDecoding line without Accepted/Drafted counts")
    assert len(out["windows"]) == len(spec) - 1


def test_metrics_unreachable_url():
    assert_clean_error(run_cli("metrics", "http://127.0.0.1:9"), "cannot reach", code=3)


def test_metrics_from_stdin_and_speculation_off():
    text = (DM / "metrics_3_final.txt").read_text()
    ok = run_cli("metrics", "-", "--json", stdin=text)
    assert ok.returncode == 0 and '"drafts"' in ok.stdout
    off = "\n".join(l for l in text.splitlines() if "spec_decode" not in l)
    assert_clean_error(run_cli("metrics", "-", stdin=off), "speculative-config")


def test_measure_unreachable_url_writes_nothing(isolated_store):
    assert_clean_error(run_cli("measure", "--url", "http://127.0.0.1:9", "-n", "1"), "cannot reach", code=3)
    if isolated_store.exists():
        import sqlite3

        assert sqlite3.connect(isolated_store).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


@pytest.mark.parametrize("args", [["measure", "--url", "http://x", "-c", "0"],
                                  ["measure", "--url", "http://x", "--suite", "poems"],
                                  ["measure", "--url", "http://x", "--temperature", "-1"],
                                  ["measure", "--url", "http://x", "--top-p", "0"]])
def test_measure_bad_arguments(args):
    proc = run_cli(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_runs_unknown_id():
    assert_clean_error(run_cli("runs", "999"), "no run 999", "specdoctor runs")


def test_unwritable_store(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    assert_clean_error(run_cli("runs", "--db", str(d)), "is a directory", "--db", code=2)


def test_logs_of_a_server_with_speculation_off():
    # a real SGLang log without speculative decoding (recorded from an upstream thread)
    f = Path(__file__).resolve().parent.parent / "sources" / "fixtures" / "sglang" / "pr22166_no_speculation.log"
    assert_clean_error(run_cli("logs", str(f)), "speculation is off", "--speculative-algorithm",
                       code=2)


def test_logs_reads_other_engines_through_the_same_command():
    import json

    f = Path(__file__).resolve().parent.parent / "sources" / "fixtures" / "llamacpp" / "pr24536_eagle3_per_position.log"
    proc = run_cli("logs", str(f), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["engine"] == "llamacpp" and out["total"]["accepted_tokens"] > 0


def test_logs_and_metrics_record_their_runs(isolated_store):
    import json

    a = json.loads(run_cli("logs", str(DM / "server.log"), "--json").stdout)
    b = json.loads(run_cli("metrics", str(DM / "metrics_3_final.txt"), "--json").stdout)
    assert a["run_id"] and b["run_id"]
    runs = json.loads(run_cli("runs", "--json").stdout)["runs"]
    assert [r["kind"] for r in runs] == ["metrics", "logs"]
    # the counter as the dump prints it, read without specdoctor's parser
    drafts = next(float(line.rsplit(" ", 1)[1]) for line in
                  (DM / "metrics_3_final.txt").read_text().splitlines()
                  if line.startswith("vllm:spec_decode_num_drafts_total{"))
    assert [r["total"]["drafts"] for r in runs] == [drafts, drafts]  # what the store kept
    assert a["total"]["drafts"] == b["total"]["drafts"] == drafts  # what each command printed
    none = json.loads(run_cli("metrics", str(DM / "metrics_3_final.txt"), "--json", "--no-store").stdout)
    assert none["run_id"] is None
