"""The real lab, end to end, through the CLI as a user runs it: one vLLM server per method.

Each server boots once and every test of the module shares it; the two boot together (~55 s
for both on 2 cores, ~45 s for one), the ngram server idle until its tests come. The exact
integer checks hold because only these tests talk to the server, in file order.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import urllib.request

import pytest

from specdoctor.lab import lab as labmod
from specdoctor.sources import prometheus, vllm_bench
from tests.conftest import run_cli

pytestmark = pytest.mark.lab
METHODS = {"draft_model": 4, "ngram": 3}


@pytest.fixture(scope="module")
def servers(lab_pool):
    """Both servers, booted together; each stopped when the module is done."""
    for method, k in METHODS.items():
        lab_pool.start(f"lab-live-{method}", "--method", method, "--k", str(k))
    yield
    for method in METHODS:
        lab_pool.stop(f"lab-live-{method}")


@pytest.fixture(scope="module", params=list(METHODS), ids=list(METHODS))
def server(request, servers, lab_pool):
    info = dict(lab_pool.get(f"lab-live-{request.param}"))
    info["start_scrape"] = scrape_text(info["url"])
    return info


def scrape_text(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def finished_requests(url: str) -> float:
    """The server's own count of finished requests (all finish reasons)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in scrape_text(url).splitlines()
               if line.startswith("vllm:request_success_total{"))


def wait_for_last_window() -> None:
    time.sleep(2 * float(labmod.STATS_INTERVAL_S) + 1.5)


def test_lab_up_prints_url_command_and_log(server):
    assert server["url"].startswith("http://127.0.0.1:")
    assert "vllm.entrypoints.openai.api_server" in server["command"]
    assert "VLLM_CPU_KVCACHE_SPACE=1" in server["command"]
    status = json.loads(run_cli("lab", "status", "--json", env=server["env"]).stdout)
    assert server["url"] in [s["url"] for s in status["servers"]]


def test_measure_then_every_view_agrees_exactly(server, isolated_store):
    proc = run_cli("measure", "--url", server["url"], "-n", "6", "--max-tokens", "40", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    total, warm = out["total"], out["warmup"]
    for key in ("drafts", "draft_tokens", "accepted_tokens", "per_position",
                "mean_acceptance_length", "accepted_per_draft", "acceptance_rate"):
        assert key in total
    assert out["requests"] == 6 and out["output_tokens"] == 6 * 40 and out["output_tok_s"] > 0
    # 6 requests: too few for a 95% bootstrap interval, and the profile says why
    assert total["ci95"] is None and out["interval_unit"] == "request"
    assert "6 requests, fewer than the 15" in total["ci95_unavailable"]
    if server["method"] == "draft_model":
        # the target drafting for itself: every draft token accepted, at every position
        assert total["per_position"] == [1.0] * 4
        assert total["accepted_tokens"] == total["draft_tokens"] == 4 * total["drafts"]
    else:
        assert 0 < total["acceptance_rate"] < 1
        assert total["draft_tokens"] <= 3 * total["drafts"]

    wait_for_last_window()
    final = json.loads(run_cli("metrics", server["url"], "--json").stdout)["total"]
    logs = json.loads(run_cli("logs", server["log"], "--json").stdout)
    keys = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")
    # 1. the log windows add up to the final /metrics dump
    assert [logs["total"][k] for k in keys] == [final[k] for k in keys]
    assert logs["skipped_lines"]["count"] == 0
    # 2. warm-up + measure deltas = the dump minus what the server had counted at start
    start = prometheus.parse_text(server["start_scrape"]).profile
    assert warm["drafts"] + total["drafts"] == final["drafts"] - start.drafts
    assert warm["accepted_tokens"] + total["accepted_tokens"] == final["accepted_tokens"] - start.accepted_tokens
    # 3. the run is in the store, whole
    db = sqlite3.connect(isolated_store)
    (status, n_scrapes, n_req) = db.execute(
        "SELECT status, (SELECT COUNT(*) FROM scrapes WHERE run_id = runs.id),"
        " (SELECT COUNT(*) FROM requests WHERE run_id = runs.id) FROM runs WHERE id = ?",
        (out["run_id"],)).fetchone()
    assert (status, n_scrapes, n_req) == ("ok", 3, 6)


def test_per_request_counts_from_scrapes_equal_the_responses_own(server):
    proc = run_cli("measure", "--url", server["url"], "-n", "4", "--max-tokens", "32",
                   "--per-request", "scrape", "--json", "--no-store")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["interval_unit"] == "request (scrape after each)"
    for r in out["per_request"]:
        assert r["drafts"] > 0
        assert {k: r[k] for k in r["response"]} == r["response"]  # same counters, two sources


def test_diagnose_reaches_the_oracle_on_a_server_it_cannot_restart(server, tmp_path):
    """diagnose --url with the server's log and no other flag: the served setup from
    /v1/models (the target) and the start-up log (method, k, drafter), the oracle of those
    files as the reference, and no restart."""
    url, log = server["url"], server["log"]
    proc = run_cli("diagnose", "--url", url, "--logs", log, "--sampling", "greedy", "--suite",
                   "code", "--num-prompts", "4", "--max-tokens", "32", "--out", str(tmp_path),
                   "--json", "--no-store", "--no-load", timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads(proc.stdout)
    served, method = d["served"], server["method"]
    assert served["target"]["from"] == f"/v1/models root of {url}"
    assert served["target"]["value"] in server["command"]
    for name, value in (("method", method), ("k", METHODS[method])):
        assert served[name]["value"] == value
        assert served[name]["from"].startswith(f"the start-up log, {log}:")
    if method == "draft_model":
        assert served["draft"]["from"].startswith(f"the start-up log, {log}:")
    assert served["missing"] == []
    ev = d["signature"]["evidence"]
    assert "vs oracle reference oracle (greedy, same prompts)" in ev, ev
    assert "within 5% at every position" in ev, ev
    assert "starting the server" not in proc.stderr   # measured as it runs


def test_bare_specdoctor_names_the_running_lab_and_measures_nothing(server):
    if server["method"] != "draft_model":
        pytest.skip("once is enough")
    proc = run_cli("--help")
    assert "starts nothing" in " ".join(proc.stdout.split())
    before = finished_requests(server["url"])
    # no command: what to run, and the lab server that is up (the only one in its home)
    proc = run_cli(env=server["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "specdoctor diagnose --url" in proc.stdout and "specdoctor lab up" in proc.stdout
    assert f"lab server running: {server['url']}" in proc.stderr
    assert finished_requests(server["url"]) == before  # no request was sent


BENCH = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n"
)


def test_scrape_delta_reproduces_vllm_bench_serve(server):
    if server["method"] != "ngram":
        pytest.skip("the recorded fixtures cover draft_model; one live run is enough")
    model_dir = server["command"].split("--model ")[1].split(" ")[0]
    before = prometheus.parse_text(scrape_text(server["url"]))
    proc = subprocess.run(
        [sys.executable, "-c", BENCH, "--backend", "vllm", "--base-url", server["url"],
         "--model", "lab", "--tokenizer", model_dir, "--dataset-name", "random",
         "--random-input-len", "24", "--random-output-len", "32", "--num-prompts", "6",
         "--max-concurrency", "2", "--seed", "1", "--temperature", "0"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = prometheus.parse_text(scrape_text(server["url"]))
    ours = prometheus.require_no_restart(prometheus.delta(before, after))
    printed = vllm_bench.parse_text_section(proc.stdout)
    assert (printed["drafts"], printed["draft_tokens"], printed["accepted_tokens"]) == (
        ours.drafts, ours.draft_tokens, ours.accepted_tokens)
    assert printed["per_position_pct"] == pytest.approx([100 * r for r in ours.per_position], abs=0.005)
    assert printed["acceptance_length"] == pytest.approx(ours.mean_acceptance_length, abs=0.005)


def test_server_dying_midway_keeps_what_was_measured(server, isolated_store):
    """Last test of each server: kill it while `measure` runs."""
    import os

    done_before = finished_requests(server["url"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdoctor", "measure", "--url", server["url"], "-n", "2000",
         "--max-tokens", "64", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    # kill it once the warm-up and at least one measured request are done (a fixed sleep
    # is too short on a loaded machine)
    deadline = time.monotonic() + 300
    while finished_requests(server["url"]) < done_before + 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    # more requests than any machine finishes before `lab down` lands: the run must be cut short
    assert proc.poll() is None, "measure finished before the server was stopped"
    assert run_cli("lab", "down", "--port", str(server["port"]), env=server["env"]).returncode == 0
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err[-2000:]
    assert "Traceback" not in err
    result = json.loads(out)
    assert result["error"] and 0 < result["requests"] < 2000
    assert result["total"]["drafts"] > 0  # from the finished requests' own metrics
    status, error = sqlite3.connect(isolated_store).execute(
        "SELECT status, error FROM runs WHERE id = ?", (result["run_id"],)).fetchone()
    assert status == "failed" and error
