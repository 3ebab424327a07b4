"""The llama.cpp lab, live: llama-server booted once for the module, measured as users measure.

The target is the lab's tiny random Llama as f32 GGUF; the drafter is the same model as q8_0,
whose rounding changes some of the random model's close greedy choices, so some drafts are
accepted and some are not. That makes every count checkable: the per-request counters
(``timings.draft_n``, ``timings.draft_n_accepted``) must add up, request by request, to the
``/metrics`` counters around the run and to the server's own log lines, and accepted must be
below drafted (read the pair the wrong way round and the first check fails).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from specdoctor.launch import free_port


def _missing() -> str | None:
    from tests.conftest import llamacpp_missing

    why = llamacpp_missing()
    if why is not None:
        return why
    for module in ("torch", "transformers", "safetensors"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: the lab models need it (bash scripts/install.sh test)"
    return None


pytestmark = pytest.mark.llamacpp


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    why = _missing()
    if why is not None:
        pytest.skip(why)


K = 4


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    from specdoctor.lab import lab, llamacpp

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, port=free_port(), draft_type="q8_0"))
    handle = lab.up(plan.spec, timeout_s=300)
    try:
        yield handle
    finally:
        lab.down(plan.spec.port)


@pytest.fixture(scope="module")
def measured(server: object) -> object:
    from specdoctor.bench import measure

    return measure.measure(server.url, measure.MeasureParams(num_prompts=16, max_tokens=32))


def test_server_is_llamacpp_with_speculation(server: object) -> None:
    spec = server.spec
    assert spec.engine == "llamacpp"
    assert spec.k == K and spec.speculation.drafter.endswith(".gguf")
    assert spec.without_speculation().speculation is None


def test_per_request_counters_add_up_to_the_scrapes(measured: object) -> None:
    m = measured
    assert m.error is None, m.error
    assert m.engine == "llamacpp" and m.unit == "request"
    assert len(m.requests) == 16
    total = m.total
    drafted = sum(r.profile.draft_tokens for r in m.requests)
    accepted = sum(r.profile.accepted_tokens for r in m.requests)
    # the run's /metrics delta, counted by the server, against the responses' own counters
    assert (drafted, accepted) == (total.draft_tokens, total.accepted_tokens)
    assert 0 < accepted < drafted, (accepted, drafted)
    assert not any("do not add up" in n for n in m.notes), m.notes
    # k draft tokens at most per verification step; every request drafted
    assert total.drafts * K >= total.draft_tokens >= total.drafts > 0
    assert all(r.profile.draft_tokens > 0 for r in m.requests)
    assert total.accepted_per_position is not None and len(total.accepted_per_position) == K
    assert sum(total.accepted_per_position) == total.accepted_tokens
    # the acceptance rate has its interval; accepted per draft an interval on the draft bounds
    assert "acceptance_rate" in total.intervals
    assert total.intervals["acceptance_rate"].low <= total.acceptance_rate \
        <= total.intervals["acceptance_rate"].high


def test_log_lines_agree_with_the_responses(server: object, measured: object) -> None:
    from collections import Counter

    from specdoctor.sources import llamacpp as source

    reading = source.parse_log(server.log_path.read_text().splitlines(), str(server.log_path))
    logged = Counter((w.profile.draft_tokens, w.profile.accepted_tokens)
                     for w in reading.windows)
    assert logged, "no draft acceptance lines in the server log"
    # one line per request at release: every measured request's pair is among them (the log
    # also holds the warm-up request's)
    per_request = Counter((r.profile.draft_tokens, r.profile.accepted_tokens)
                          for r in measured.requests)
    assert not per_request - logged, (per_request, logged)


def test_served_gguf_is_the_lab_model(server: object) -> None:
    """The GGUF export is the lab's model: llama-server splits text into the same token ids as
    the lab tokenizer, and continues greedily as transformers does on the original weights
    (the first 16 tokens of each prompt; later a near tie on the random model may flip)."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from specdoctor.bench import http
    from specdoctor.bench.prompts import take
    from specdoctor.lab.models import target_model

    path = target_model()
    tok = AutoTokenizer.from_pretrained(path)
    model = LlamaForCausalLM.from_pretrained(path).eval()
    for prompt in take("code", 4):
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        assert http.post_json(server.url + "/tokenize", {"content": prompt})["tokens"] == ids
        served = http.post_json(server.url + "/completion", {
            "prompt": ids, "n_predict": 16, "temperature": 0, "return_tokens": True,
            "ignore_eos": True})["tokens"]
        with torch.no_grad():
            greedy = model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)
        assert served == greedy[0, len(ids):].tolist(), prompt


def test_drafts_per_request_are_steps_within_one_of_the_servers_count(measured: object) -> None:
    m = measured
    drafts = [r.profile.drafts for r in m.requests]
    assert all(d is not None and d > 0 for d in drafts), drafts
    # each request's steps: completion tokens - 1 - accepted; over the run at most one a request
    # more than the drafts the server counted (a last step with no room to draft)
    assert all(d == r.completion_tokens - 1 - r.profile.accepted_tokens
               for d, r in zip(drafts, m.requests))
    assert 0 <= sum(drafts) - m.total.drafts <= len(drafts)
    assert any("drafts per request are its steps" in n for n in m.notes), m.notes


def test_requests_sample_from_temperature_and_top_p_alone() -> None:
    from specdoctor.bench import measure

    body = measure.request_body("lab", "x", measure.MeasureParams(temperature=1.0, top_p=0.95),
                                engine="llamacpp")
    # llama-server's own defaults (top_k 40, min_p 0.05) would narrow the target's distribution
    assert (body["top_k"], body["min_p"], body["repeat_penalty"]) == (0, 0.0, 1.0)
    assert "top_k" not in measure.request_body("m", "x", measure.MeasureParams())


def test_diagnose_reads_the_gguf_pair_meets_its_oracle_and_runs_nothing_of_vllms(
        tmp_path) -> None:
    """The lab's trained target (f32) with its small trained drafter (q8_0) on llama-server:
    the oracle reads the two GGUF files, greedy meets it, no cause is named, and what needs
    vLLM's internals is not applicable, never run, never excluding anything."""
    import json

    from specdoctor.lab import llamacpp
    from tests.conftest import run_cli

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, port=free_port(), target="trained",
                                                  draft="small", budget="ci", draft_type="q8_0"))
    r = run_cli("diagnose", "--launch", plan.spec.shell_command(), "-o", str(tmp_path),
                "--json", "--db", str(tmp_path / "db.sqlite"), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert "oracle" in d["signature"]["evidence"] and "within 5%" in d["signature"]["evidence"]
    assert d["root_cause"] is None
    ledger = {e["id"]: e for e in d["ledger"]}
    for hid in ("engine-drafting", "rejection-sampler"):
        assert ledger[hid]["verdict"] == "inconclusive"
        assert any("not applicable to llama.cpp" in ev for ev in ledger[hid]["evidence"])
    assert ledger["tokenizer-mismatch"]["verdict"] == "excluded"
    # the drafter's config is compared as vLLM would read it, and said to be: the server is
    # llama-server, which reads its GGUF
    config = " ".join(ledger["draft-config-mismatch"]["evidence"])
    assert "the server is llamacpp" in config and "reads of this drafter" not in config


def test_a_drafter_without_a_draft_type_is_found_by_relaunching_with_one(tmp_path) -> None:
    """-md without --spec-type: llama-server loads the drafter and drafts nothing; the
    diagnosis relaunches with one speculative setting changed at a time and names the one."""
    import json

    from specdoctor.launch import argv as A
    from specdoctor.lab import llamacpp
    from tests.conftest import run_cli

    plan = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, port=free_port(), draft_type="q8_0"))
    launch = plan.spec.with_port(free_port())
    argv = A.drop(launch.argv, "--spec-type")
    import shlex

    r = run_cli("diagnose", "--launch", " ".join(shlex.quote(a) for a in argv), "-o",
                str(tmp_path), "--json", "--no-store", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert "nothing drafted" in d["signature"]["evidence"]
    assert (d["root_cause"], d["root_cause_basis"]) == ("speculation-off", "counterfactual")
    entry = next(e for e in d["ledger"] if e["id"] == "speculation-off")
    assert "--spec-type draft-simple" in entry["evidence"][-1]
    assert d["root_cause_explains"]["share_of_gap"] > 0.5   # most of the gap to the oracle


def test_a_bench_cell_reads_llama_servers_counters(server: object, measured: object) -> None:
    from specdoctor.bench import cell

    reading = cell.scrape(server.url)
    assert reading is not None and reading.profile.draft_tokens >= measured.total.draft_tokens > 0
    assert reading.profile.accepted_per_position is not None   # /metrics counts positions


def test_a_bench_cell_has_per_request_units_from_the_streams_last_chunk(server: object) -> None:
    """A streamed response's last chunk carries llama-server's timings: each request becomes a
    unit (its steps as drafts), so a cell's acceptance has an interval and gate can test it."""
    import json

    from tests.conftest import run_cli

    r = run_cli("bench", "--url", server.url, "--suite", "code", "--sampling", "greedy",
                "-c", "1", "-n", "16", "--json", "--no-report", timeout=300)
    assert r.returncode == 0, r.stderr[-1500:]
    row = json.loads(r.stdout)["rows"][0]
    assert row["profile"]["ci95"] is not None, row["profile"]
    assert not any("no confidence interval" in n for n in row["notes"]), row["notes"]


def test_lab_faults_serve_under_neutral_names_and_the_vocabulary_one_drafts_nothing(
        tmp_path) -> None:
    """lab up --engine llamacpp --fault: the drafter edited before its GGUF is written (its path
    names no fault); the re-indexed drafter is refused by llama-server, which drafts nothing."""
    from specdoctor.bench import measure
    from specdoctor.lab import lab, llamacpp

    healthy = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, port=free_port()))
    for fid in llamacpp.FAULTS:
        p = llamacpp.plan(llamacpp.LlamaCppRequest(k=None, port=free_port(), fault=fid))
        assert fid not in p.spec.shell_command() and fid not in p.spec.label
        f = llamacpp.FAULTS[fid]
        assert (p.draft != healthy.draft) == (f.edit is not None)
        assert p.k == (f.k or llamacpp.DEFAULT_K)
    plan = llamacpp.plan(llamacpp.LlamaCppRequest(k=K, port=free_port(),
                                                  fault="llama-draft-vocab"))
    lab.up(plan.spec, timeout_s=120)
    try:
        m = measure.measure(plan.spec.url, measure.MeasureParams(num_prompts=4, max_tokens=16))
    finally:
        lab.down(plan.spec.port)
    assert m.total is not None and m.total.draft_tokens == 0
