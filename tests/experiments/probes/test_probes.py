"""The probes experiment's reading and decisions, on the recorded [probe] lines of a real lab
server (fixtures/dflash_window_startup.log: the trained DFlash drafter served with a 4-token
window, its config and the target's beside it) and on views built from them with one setting
changed (a draft built under another context-parallel layout, a rope built otherwise than the
config states); and the experiment on a server that never starts (a real process)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from specdoctor.experiments.base import Context

from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.probes import compare, view
from specdoctor.experiments.probes import experiment as probes
from specdoctor.launch import LaunchSpec
from specdoctor.packs.run import collect
from specdoctor.served_files import stated_masks

FIX = Path(__file__).parent / "fixtures"


def _view() -> view.EngineView:
    return view.read(collect((FIX / "dflash_window_startup.log").read_text()))


def _cfg(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def _with_parallel(v: view.EngineView, target: dict, draft: dict) -> view.EngineView:
    assert v.target is not None and v.draft is not None
    return dataclasses.replace(
        v, target=dataclasses.replace(v.target, parallel={**v.target.parallel, **target}),
        draft=dataclasses.replace(v.draft, parallel={**v.draft.parallel, **draft}))


def _with_draft_rope(v: view.EngineView, **change) -> view.EngineView:
    assert v.draft is not None
    ropes = tuple(dataclasses.replace(r, **change) for r in v.draft.ropes)
    return dataclasses.replace(v, draft=dataclasses.replace(v.draft, ropes=ropes))


def test_the_recorded_lines_read_as_the_engine_built_them():
    v = _view()
    assert v.target is not None and v.target.cls == "Qwen3ForCausalLM"
    assert v.draft is not None and v.draft.cls == "DFlashQwen3ForCausalLM"
    assert [(x.window, x.backend) for x in v.draft.attention] == [(4, "CPU_ATTN")] * 2
    assert v.metadata_causal is False
    assert [v.draft_causal(x) for x in v.draft.attention] == [False] * 2
    assert v.aux_layers == (1, 2) and v.method == "dflash" and v.k == 3
    assert v.target.dtype == "torch.float32" and v.target.block_size == 128
    assert v.draft.distinct_ropes()[0]["base"] == 10000.0 and not v.errors


def test_draft_parallel_config_excluded_live_and_confirmed_when_the_draft_loses_dcp():
    v = _view()
    f = compare.parallel_finding(v, "dflash")
    assert f.verdict is Verdict.EXCLUDED and "dcp 1" in f.evidence
    # Case B: the target shards its KV cache by decode context parallelism, the draft not
    lost = _with_parallel(v, {"decode_context_parallel_size": 2}, {})
    f = compare.parallel_finding(lost, "mtp")
    assert f.verdict is Verdict.CONFIRMED
    assert "decode_context_parallel_size: target 2, draft 1" in f.evidence
    same = _with_parallel(v, {"decode_context_parallel_size": 2},
                          {"decode_context_parallel_size": 2})
    assert compare.parallel_finding(same, "mtp").verdict is Verdict.EXCLUDED
    # the size restored but not its interleave (draft_model in vLLM 0.32)
    inter = _with_parallel(v, {"decode_context_parallel_size": 2,
                               "dcp_kv_cache_interleave_size": 4},
                           {"decode_context_parallel_size": 2})
    f = compare.parallel_finding(inter, "draft_model")
    assert f.verdict is Verdict.CONFIRMED and "dcp_kv_cache_interleave_size" in f.evidence
    none = dataclasses.replace(v, draft=None)
    assert compare.parallel_finding(none, "ngram").verdict is Verdict.EXCLUDED
    assert compare.parallel_finding(none, "eagle3").verdict is Verdict.INCONCLUSIVE


def test_rope_built_as_stated_stays_open_built_otherwise_confirms_defaulted_is_a_lead():
    v, draft, target = _view(), _cfg("dflash_window_draft.json"), _cfg("dflash_target.json")
    f, leads = compare.rope_finding(v, draft, target, "dflash")
    assert f.verdict is Verdict.INCONCLUSIVE and "positions" in f.evidence and not leads
    wrong = {**draft, "rope_parameters": {"rope_theta": 1000.0, "rope_type": "default"}}
    f, _ = compare.rope_finding(v, wrong, target, "dflash")
    assert f.verdict is Verdict.CONFIRMED
    assert "theta 10000.0 where the config states 1000" in f.evidence
    style = {**draft, "is_neox_style": False}
    assert compare.rope_finding(v, style, target, "dflash")[0].verdict is Verdict.CONFIRMED
    # the config states no theta and the engine built its default, unlike the target
    silent = {k: x for k, x in draft.items() if k != "rope_parameters"}
    defaulted = _with_draft_rope(v, base=1000000.0)
    f, leads = compare.rope_finding(defaulted, silent, target, "dflash")
    assert f.verdict is Verdict.INCONCLUSIVE and "a lead" in f.evidence
    assert [(x.field, x.value, x.hypothesis) for x in leads] == [
        ("rope_theta", 10000.0, "draft-config-mismatch")]


def test_a_mask_served_otherwise_than_the_files_state_is_a_lead():
    v, draft = _view(), _cfg("dflash_window_draft.json")
    assert stated_masks(draft, "dflash", 2) == [(4, False), (4, False)]
    assert compare.mask_finding(v, draft, "dflash") is None      # served as the files state
    full = {**draft, "dflash_config": {**draft["dflash_config"], "use_swa": False}}
    f = compare.mask_finding(v, full, "dflash")
    assert f is not None and f.verdict is Verdict.INCONCLUSIVE
    assert "served non-causal, window 4, config states non-causal, no window" in f.evidence


def test_aux_layers_other_than_the_config_names_are_a_lead():
    v, draft = _view(), _cfg("dflash_window_draft.json")
    assert compare.aux_finding(v, draft, {}, None, "dflash") is None  # [0, 1] + 1 = (1, 2)
    other = {**draft, "dflash_config": {**draft["dflash_config"], "target_layer_ids": [0]}}
    f = compare.aux_finding(v, other, {}, None, "dflash")
    assert f is not None and f.verdict is Verdict.INCONCLUSIVE and "[1, 2]" in f.evidence


class NeverServes:
    """Starts the launch as a real process that exits before it serves."""

    def __init__(self) -> None:
        self.started: list[LaunchSpec] = []

    def start(self, launch: LaunchSpec, log_path: Path):
        import os
        import subprocess

        from specdoctor.errors import SpecdoctorError

        self.started.append(launch)
        with open(log_path, "wb") as log:
            rc = subprocess.run(launch.argv, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **launch.env}, timeout=60).returncode
        raise SpecdoctorError(f"the server exited with code {rc} before it answered", "read it")

    def stop(self, server) -> None:
        raise AssertionError("nothing started")


def test_a_relaunch_that_never_serves_is_inconclusive_and_shared_with_the_cache_ab(tmp_path):
    from specdoctor.experiments.compile_cache import experiment as cache

    argv = (sys.executable, "-c", "import os; print('PYTHONPATH', os.environ['PYTHONPATH']); "
            "print('engine boom'); raise SystemExit(3)")
    launcher = NeverServes()
    ctx = Context(workdir=tmp_path, launch=LaunchSpec(argv, {"PYTHONPATH": "/user/patch"}),
                  launcher=launcher, prompts=("def f():",), k=3, method="dflash")
    exp = probes.Experiment()
    assert exp.unavailable(ctx) is None
    res = exp.run(ctx, ("draft-parallel-config", "rope-sync"))
    assert [f.verdict for f in res.findings] == [Verdict.INCONCLUSIVE] * 2
    assert "exited with code 3" in res.findings[0].evidence
    assert "engine boom" in res.findings[0].evidence              # the log's tail
    assert ctx.engine_view is None
    # the pack went after the launch's own PYTHONPATH, with its gate and a fresh cache root
    env = launcher.started[0].env
    assert env["PYTHONPATH"].split(":")[0] == "/user/patch" and env["SPECDOCTOR_PROBES"] == "1"
    assert "isolated-cache" in env["VLLM_CACHE_ROOT"]
    # the compile-cache A/B of the same diagnosis takes the same relaunch: no second start
    ctx.measured.greedy = None
    out = cache.Experiment().run(ctx, ("compile-cache-pollution",))
    assert len(launcher.started) == 2                    # the as-found arm (no baseline) only
    assert launcher.started[1].env.get("SPECDOCTOR_PROBES") is None
    assert out.findings[0].verdict is Verdict.INCONCLUSIVE
    assert not list(tmp_path.glob("isolated-cache-*"))   # the root it made is gone


def test_no_view_reason_names_a_pack_that_never_loaded(tmp_path):
    from specdoctor.experiments.common import SharedRelaunch

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "sitecustomize.py").write_text("print('mine')\n")
    launch = LaunchSpec(("x",), {"PYTHONPATH": f"{plain}:{tmp_path / 'pack'}"})
    why = probes.no_view_reason(SharedRelaunch("fresh-state", launch, None, "served\n", None),
                                view.read([]))
    assert "does not run the next sitecustomize" in why
