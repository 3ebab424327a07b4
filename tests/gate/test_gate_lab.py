"""The gate on real vLLM: a lab baseline at k=3 and two of the three candidates of docs/gate.md.

The lab serves its trained EAGLE3 head (``ci`` budget) at k=3, the k it was trained for
(docs/gate.md's demo serves it at k=4; k=3 lets the EAGLE3 oracle's lab test share the server,
whose sampled check needs every position's acceptance above zero), with the cpu-sampler-fix pack
so that sampled acceptance is real (and noisy); the baseline is a ``bench --url`` of it over
code prompts × greedy and sampled (temperature 0.5) at concurrency 4, 16 requests a cell.
Then, each with ``--seed 1000`` (sampled streams of its own):

1. the same server (same boot): passes;
2. the lab with ``--fault eagle3-d2t-off-by-one`` (second boot): fails, naming each cell's
   mean acceptance length and position 0 with both intervals and a reproduce command, and
   ``--diagnose`` prints diagnose's verdict.

The third candidate, the baseline's command at ``--dtype bfloat16`` (a real change inside the
noise), is gated on its recorded measurement (tests/gate/test_compare_recorded.py: its
comparison and the text a user reads); a boot here would cost the suite more than a minute.
Two boots, booted together (~1.5 minutes for both on 2 cores), both with inductor (vLLM's
default backend): the gate measures more than it boots. The baseline server is the session's
``eagle3_ci_k3_traced`` (tests/conftest.py), which tests/oracle/heads/test_eagle3_live.py holds
to the EAGLE3 oracle: it also carries the oracle's draft hook, which only observes.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import EAGER_BACKEND, EAGLE3_CI_K3, run_cli, start_eagle3_ci_k3_traced

pytestmark = pytest.mark.lab

CELLS = ["--suite", "code", "--sampling", "greedy,official", "--temperature", "0.5", "-c", "4",
         "-n", "16", "--max-tokens", "48"]
FAULT = "eagle3-d2t-off-by-one"


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory, lab_pool) -> dict:
    tmp = tmp_path_factory.mktemp("gate")
    db, file = tmp / "store.db", tmp / "gate-baseline.json"

    def gate(*args: str) -> tuple[int, str, str]:
        proc = run_cli("gate", "--baseline", str(file), *args, "--seed", "1000", "--db",
                       str(db), timeout=3600)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        return proc.returncode, proc.stdout, proc.stderr

    # both servers boot at once: the baseline (the session's, shared) and the served fault
    start_eagle3_ci_k3_traced(lab_pool)
    lab_pool.start("gate-fault", *EAGLE3_CI_K3, "--fault", FAULT, env={EAGER_BACKEND: None})
    out: dict = {}
    try:
        baseline = lab_pool.get("eagle3-ci-k3-traced")
        assert "cpu-sampler-fix" in baseline["patches"]
        url = baseline["url"]
        bench = run_cli("bench", "--url", url, *CELLS, "--no-report", "--db", str(db),
                        timeout=1800)
        assert bench.returncode == 0, bench.stderr[-3000:]
        for step in (("--save", "lab"), ("--export", "lab", str(file))):
            proc = run_cli("gate", *step, "--db", str(db), timeout=60)
            assert proc.returncode == 0, proc.stderr
        out["same"] = gate("--url", url, "--json")
        out["fault"] = gate("--url", lab_pool.get("gate-fault")["url"], "--json", "--diagnose")
    finally:
        lab_pool.stop("gate-fault")
    return out


def test_the_same_server_passes(gates):
    code, stdout, _ = gates["same"]
    res = json.loads(stdout)
    assert code == 0 and res["status"] == "pass"
    cmp = res["comparison"]
    assert cmp["regressions"] == [] and cmp["tests_run"] >= 4
    # greedy repeats exactly on an unchanged server; the sampled cell drew new streams
    greedy = [t for t in cmp["tests"] if "/greedy/" in t["cell"] and t["p"] is not None]
    assert greedy and all(t["change"] == 0 for t in greedy)
    sampled = [t for t in cmp["tests"] if "/official/" in t["cell"]]
    assert any(t["change"] not in (0, None) for t in sampled)


def test_a_served_fault_fails_naming_cell_position_and_both_intervals(gates):
    code, stdout, _ = gates["fault"]
    res = json.loads(stdout)
    assert code == 1 and res["status"] == "fail"
    regressed = {(t["cell"], t["figure"]) for t in res["comparison"]["regressions"]}
    for cell in ("code/greedy/c4", "code/official/c4"):
        assert (cell, "mean_acceptance_length") in regressed
        assert (cell, "per_position[0]") in regressed
        assert res["reproduce"][cell].startswith(
            f"specdoctor gate --baseline {res['baseline']['ref']} --url http://127.0.0.1:")
        assert f"--suite code --sampling {cell.split('/')[1]} -c 4" in res["reproduce"][cell]
    for t in res["comparison"]["regressions"]:
        assert t["baseline"]["ci95"] and t["candidate"]["ci95"]
        assert t["candidate"]["value"] < t["baseline"]["value"] and t["p"] < t["holm_threshold"]
    # the d2t fault maps every draft token to a wrong target id: greedy accepts nothing (a
    # sampled token may still match the wrong id by chance)
    for t in res["comparison"]["regressions"]:
        if t["figure"].startswith("per_position"):
            assert t["candidate"]["value"] == 0 if "/greedy/" in t["cell"] else \
                t["candidate"]["value"] < 0.02
    d = res["diagnosis"]
    assert d is not None and "error" not in d, d
    assert d["signature"]["class"] and "root_cause" in d
