"""``engine_trace.replay`` on engine steps whose truth is known: the oracle's own simulated
engine (the lab's trained target and its small independent drafter, ``ci`` budget, no server),
turned into the rows the draft trace records. A correct engine replays as one: drafts equal to
the drafter's chain, accept decisions as a correct verifier's (greedy exactly, sampled within
the Bernoulli noise); drafts swapped for others, or acceptances forced, are seen as drafting
and verification differences. The decision on recorded real-server replays is in
tests/experiments/replay/test_decide.py."""

from __future__ import annotations

import numpy as np
import pytest

from specdoctor.verdict.findings import Verdict
from specdoctor.oracle import engine_trace
from specdoctor.oracle.simulate import RequestTrace, Sampling

K, N, MAX_TOKENS = 3, 8, 24


@pytest.fixture(scope="module")
def models():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from specdoctor.bench.prompts import take
    from specdoctor.lab import train
    from specdoctor.oracle.runner import OracleConfig

    cfg = OracleConfig(train.trained_target("ci"), tuple(take("code", N)),
                       draft=train.small_drafter("ci"), k=K, max_tokens=MAX_TOKENS,
                       max_model_len=1024)
    target, drafter = engine_trace.load_replay_models(cfg)
    return cfg, target, drafter


def _simulate(cfg, sampling: Sampling, samples: int = 1) -> list[RequestTrace]:
    import dataclasses

    from specdoctor.oracle.runner import run_oracle

    return run_oracle(dataclasses.replace(cfg, sampling=sampling, samples=samples)).traces


def _engine(traces: list[RequestTrace]) -> list[engine_trace.EngineRequest]:
    return [engine_trace.EngineRequest(f"r{i}", list(t.prompt_ids), t.rows())
            for i, t in enumerate(traces)]


def test_a_correct_greedy_engine_replays_as_one(models):
    from specdoctor.experiments.replay import decide as D

    cfg, target, drafter = models
    traces = _simulate(cfg, Sampling())
    r = engine_trace.replay(_engine(traces), target, drafter, K, Sampling())
    assert r.steps == sum(len(t.steps) for t in traces) > 0
    assert r.drafts_equal_oracle == r.draft_tokens
    per = np.zeros(K)
    for t in traces:
        per += t.counts(K)[3]
    assert r.realized_per_position == [int(x) for x in per]
    assert np.allclose(r.expected_per_position, per)   # greedy: expected is realized
    assert 0 < per[0] < r.steps                        # neither useless nor a copy
    loc = D.localise({"greedy": r})
    assert not loc.drafting["greedy"].differ and not loc.verification["greedy"].differs
    # the records read back give the same replay
    back = engine_trace.Replay.from_records(r.records_json())
    assert back.to_json() == r.to_json() and len(back.records) == len(r.records)


def test_drafts_swapped_are_drafting_and_acceptances_forced_are_verification(models):
    from specdoctor.experiments.replay import decide as D

    cfg, target, drafter = models
    # drafting: where a step accepted nothing, its first draft becomes another token that is
    # not the step's correction either (a correct verifier still rejects it, the context and
    # the decision stay as they were)
    engine = _engine(_simulate(cfg, Sampling()))
    swapped = 0
    for e in engine:
        for i, (d, out) in enumerate(e.rows):
            if d and len(out) == 1:
                d[0] = next(x for x in range(1024) if x not in (d[0], out[0]))
                swapped += 1
    assert swapped >= D.MIN_CLEAR
    loc = D.localise({"greedy": engine_trace.replay(engine, target, drafter, K, Sampling())})
    dr, ver = loc.drafting["greedy"], loc.verification["greedy"]
    assert dr.differs and dr.differ + dr.near_ties == swapped, dr.to_json()
    assert dr.first_position[0] == dr.differ
    assert not ver.differs, ver.to_json()
    # verification: the last drafting step of every request accepts all its drafts (no later
    # step's context changes)
    engine = _engine(_simulate(cfg, Sampling()))
    forced = 0
    for e in engine:
        i = max(j for j, (d, _) in enumerate(e.rows) if d)
        d, out = e.rows[i]
        if len(out) - 1 < len(d):
            e.rows[i] = (d, list(d) + [0])
            forced += 1
    assert forced >= D.MIN_CLEAR
    loc = D.localise({"greedy": engine_trace.replay(engine, target, drafter, K, Sampling())})
    dr, ver = loc.drafting["greedy"], loc.verification["greedy"]
    assert ver.differs and ver.direction == "above", ver.to_json()
    assert not dr.differ, dr.to_json()


def test_a_correct_sampled_engine_replays_within_its_noise_and_a_wrong_one_does_not(models):
    from specdoctor.experiments.replay import decide as D

    cfg, target, drafter = models
    s = Sampling(1.0, 0.95)
    engine = _engine(_simulate(cfg, s, samples=4))
    r = engine_trace.replay(engine, target, drafter, K, s)
    assert r.drafts_equal_oracle == r.draft_tokens > 0
    v = D.verification(r)
    assert v.steps >= D.MIN_STEPS and not v.differs, v.to_json()
    assert all(p.z is not None and abs(p.z) < p.critical for p in v.positions), v.to_json()
    # the same steps re-scored at another temperature: the engine's decisions no longer match
    wrong = D.verification(engine_trace.replay(engine, target, drafter, K, Sampling(0.3, 0.95)))
    assert wrong.differs, wrong.to_json()


def test_a_drafters_chain_shifted_by_no_position_is_its_chain_and_leaves_its_cache(models):
    cfg, _, drafter = models
    contexts = []
    for t in _simulate(cfg, Sampling())[:4]:
        ids = list(t.prompt_ids) + list(t.output_ids)
        contexts += [ids[:n] for n in range(len(t.prompt_ids), len(ids), 5)]
    moved = 0
    for c in contexts:
        plain, _ = drafter.argmax_chain(c, K)
        assert drafter.chain_shifted(c, K, 0) == plain
        moved += drafter.chain_shifted(c, K, 1) != plain
        # what the shifted steps wrote is gone: the cache serves the plain chain again
        assert drafter.argmax_chain(c, K)[0] == plain
        assert drafter.lm.cache.get_seq_length() == len(drafter.lm.ids)
    assert 0 < moved < len(contexts), (moved, len(contexts))


def test_drafts_one_position_ahead_are_rope_sync_and_other_drafts_are_not(models):
    """An engine whose drafts are the drafter's chain with its decode steps one position ahead
    (SGLang PR #25015's mechanism) against one whose differing drafts are other tokens: the
    replay localises the first to the positions (rope-sync) and the second to drafting."""
    from specdoctor.experiments.replay import decide as D

    cfg, target, drafter = models
    engine = _engine(_simulate(cfg, Sampling()))
    ahead = 0
    for e in engine:
        ctx = list(e.prompt_ids)
        for i, (d, out) in enumerate(e.rows):
            if d:
                s = drafter.chain_shifted(ctx, len(d), 1)
                ahead += s != d
                e.rows[i] = (s, out)
            ctx += list(out)
    r = engine_trace.replay(engine, target, drafter, K, Sampling())
    assert D.drafting(r).differs, D.drafting(r).to_json()
    shifted = {off: engine_trace.shifted_chains(engine, r, drafter, off) for off in D.OFFSETS}
    checks = {off: D.positions(r, off, ch) for off, ch in shifted.items()}
    assert checks[1].explains and not checks[-1].explains, {k: c.to_json() for k, c in
                                                            checks.items()}
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(checks.values())}
    v = {f.hypothesis: f.verdict for f in D.decide(loc)}
    assert v["rope-sync"] is Verdict.CONFIRMED and v["engine-drafting"] is Verdict.INCONCLUSIVE
    # the same number of drafts changed to tokens no offset proposes: drafting, not positions
    engine = _engine(_simulate(cfg, Sampling()))
    swapped = 0
    for e in engine:
        for i, (d, out) in enumerate(e.rows):
            if d and len(out) == 1 and swapped < ahead:
                d[0] = next(x for x in range(1024) if x not in (d[0], out[0]))
                swapped += 1
    r = engine_trace.replay(engine, target, drafter, K, Sampling())
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(D.positions(r, off, engine_trace.shifted_chains(
        engine, r, drafter, off)) for off in D.OFFSETS)}
    assert not any(c.explains for c in loc.transforms["greedy"])
    v = {f.hypothesis: f.verdict for f in D.decide(loc)}
    assert v["engine-drafting"] is Verdict.CONFIRMED and v["rope-sync"] is Verdict.INCONCLUSIVE


def test_lookup_steps_the_engine_left_without_a_draft_count_what_their_chain_loses(models):
    """Prompt lookup drafts only where it finds a match; an engine that drafts on fewer steps
    than that (here every other step's drafts dropped) loses what those drafts would have had
    accepted, with every draft it does make equal to the lookup's. The replay counts the
    chain's expected acceptance on the steps the engine left without a draft, so the loss is
    there; an engine that drafts wherever the lookup does loses nothing."""
    import dataclasses

    from specdoctor.experiments.replay import decide as D
    from specdoctor.oracle.simulate import NgramDrafter, run_request

    cfg, _, _ = models
    ng = dataclasses.replace(cfg, method="ngram", draft=None, max_tokens=48)
    target, lookup = engine_trace.load_replay_models(ng)

    class EveryOther:
        calls = 0

        def reset(self):
            lookup.reset()

        def argmax_chain(self, ctx, k):
            EveryOther.calls += 1
            return ([], []) if EveryOther.calls % 2 else lookup.argmax_chain(ctx, k)

    from specdoctor.bench.prompts import take

    def engine(drafter):
        tok = __import__("specdoctor.oracle.models", fromlist=["x"]).load_tokenizer(cfg.target)
        traces = [run_request(list(tok(p)["input_ids"]), target, drafter, K, 48, Sampling(),
                              np.random.default_rng(0), i) for i, p in enumerate(take("code", N))]
        return _engine(traces)

    assert isinstance(lookup, NgramDrafter)
    healthy = D.drafting(engine_trace.replay(engine(lookup), target, lookup, K, Sampling()))
    r = engine_trace.replay(engine(EveryOther()), target, lookup, K, Sampling())
    skipping = D.drafting(r)
    assert healthy.loss == 0.0 and not healthy.differ
    assert skipping.differ > 0 and skipping.loss > 0.2
    # every step that differs is one the engine left without a draft: the drafts it made are
    # the lookup's, so the loss is all in the drafts it did not make
    assert all(not x.drafts for x in r.records if x.first_mismatch() is not None)
