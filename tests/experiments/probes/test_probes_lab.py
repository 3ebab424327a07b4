"""probes, masks and astexec on one relaunch of a real lab server (one boot): the trained DFlash
drafter of the ``ci`` budget (the full budget's shapes, trained in a minute on a cold cache
where the full pair takes about 20), through the diagnosis' own launcher.

The probes read the draft as the live engine built it and exclude draft-parallel-config (the
draft was built under the target's layout); the rope is built as the config states, which does
not clear rope-sync (positions are not seen at start-up). The masks experiment then takes every
draft layer's mask and backend from that live view and excludes attention-mask (DFlash's own
non-causal block, no window, vLLM's CPU op read back bit by bit); astexec runs the installed
engine's own config functions on the same served config, agrees with the live view, and
excludes attention-mask too."""

from __future__ import annotations

import pytest

from specdoctor.experiments.base import Context

from specdoctor.verdict.findings import Verdict

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    from specdoctor.bench.prompts import take
    from specdoctor.experiments import common
    from specdoctor.experiments.probes import experiment as probes
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import Servers, free_port

    launch = labmod.lab_spec("dflash", 3, free_port(), budget="ci")
    s = common.settings(launch)
    ctx = Context(workdir=tmp_path_factory.mktemp("probes"), launch=launch,
                  launcher=Servers(timeout_s=1500), settings=s, method=s.method, k=s.k,
                  target_dir=s.target, draft_dir=s.draft, tokenizer_dir=s.tokenizer,
                  prompts=tuple(take("code", 2)), max_tokens=24)
    res = probes.Experiment().run(ctx, ("draft-parallel-config", "rope-sync"))
    ctx.launcher.stop_all()
    return ctx, res


def test_probes_read_the_live_draft_and_exclude_its_parallel_config(probed):
    ctx, res = probed
    by = {f.hypothesis: f for f in res.findings}
    assert res.error is None, res.to_json()
    v = ctx.engine_view
    assert v is not None and v.draft is not None and v.target is not None
    assert v.draft.cls == "DFlashQwen3ForCausalLM" and len(v.draft.attention) == 2
    assert {x.backend for x in v.draft.attention} == {"CPU_ATTN"}
    assert v.metadata_causal is False and v.aux_layers == (1, 2)
    assert by["draft-parallel-config"].verdict is Verdict.EXCLUDED
    assert "target's own layout" in by["draft-parallel-config"].evidence
    assert by["rope-sync"].verdict is Verdict.INCONCLUSIVE
    assert "built as its config states" in by["rope-sync"].evidence
    # it served and was measured with the pack on (the ci drafter accepts little: no floor)
    assert "accepted_per_draft_with_probes" in res.numbers, res.numbers


def test_masks_from_the_live_view_exclude_the_attention_mask(probed):
    from specdoctor.experiments.masks import experiment as masks

    ctx, _ = probed
    res = masks.Experiment().run(ctx, ("attention-mask",))
    f = res.findings[0]
    assert f.verdict is Verdict.EXCLUDED, f.evidence
    assert res.numbers["source"] == "the live engine (startup probes)"
    assert "non-causal, no window on cpu" in f.evidence and "cpu op read back" in f.evidence


def test_astexec_runs_the_engines_functions_on_the_served_config(probed):
    from specdoctor.experiments.astexec import experiment as astexec

    ctx, _ = probed
    res = astexec.Experiment().run(ctx, ("attention-mask", "draft-config-mismatch"))
    by = {f.hypothesis: f for f in res.findings}
    cv = ctx.code_view
    assert cv is not None and cv.errors == []
    # the engine's functions and the live engine agree, layer by layer
    live = [(x.window, ctx.engine_view.draft_causal(x)) for x in ctx.engine_view.draft.attention]
    assert list(cv.layers) == live and cv.metadata_causal == ctx.engine_view.metadata_causal
    assert cv.aux_layers == ctx.engine_view.aux_layers
    assert by["attention-mask"].verdict is Verdict.EXCLUDED
    assert by["draft-config-mismatch"].verdict is Verdict.INCONCLUSIVE
    assert "no lead" in by["draft-config-mismatch"].evidence
