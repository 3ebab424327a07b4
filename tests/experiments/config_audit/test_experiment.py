"""The config-audit hook of ``diagnose`` on the lab's real model directories (the tiny target and
its `ci`-budget independent drafter, from the shared model cache) and on edited copies: no
server, no vLLM. The lab is used here only to find the directories."""

from __future__ import annotations

import json
import shutil

import pytest

from specdoctor.diagnose import catalogue
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import Verdict
from specdoctor.experiments.config_audit import experiment as hook
from specdoctor.experiments.config_audit import lints
from specdoctor.lab import models as lab_models
from specdoctor.lab import train
from specdoctor.launch import LaunchSpec

ALL = ("draft-config-mismatch", "rope-sync", "attention-mask", "tokenizer-mismatch",
       "cudagraph-capture-size", "k-beyond-training", "draft-parallel-config")


@pytest.fixture(scope="module")
def pair():
    return lab_models.target_model(), train.small_drafter("ci")


def _copy(tmp_path, src, **changes):
    out = tmp_path / "m1"
    shutil.copytree(src, out)
    cfg = json.loads((out / "config.json").read_text())
    for k, v in changes.items():
        cfg[k] = v
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def _ctx(tmp_path, target, draft, k=3, argv=(), logs=None):
    launch = LaunchSpec(("vllm", "serve", str(target), *argv,
                     "--speculative-config", json.dumps({"method": "draft_model",
                                                         "model": str(draft),
                                                         "num_speculative_tokens": k})))
    ctx = Context(workdir=tmp_path, launch=launch, method="draft_model", k=k,
                  target_dir=target, draft_dir=draft)
    if logs:
        ctx.server_logs = {"baseline": logs}
    return ctx


def _by(result):
    return {f.hypothesis: f for f in result.findings}


def test_the_hook_is_wired_through_hooks():
    spec = catalogue.load().experiments["config-audit"]
    assert isinstance(catalogue.experiment(spec), hook.Experiment)


def test_a_draft_rope_theta_that_differs_is_an_inconclusive_lead_naming_both_values(tmp_path, pair):
    target, draft = pair
    bad = _copy(tmp_path, draft, rope_parameters={"rope_theta": 1000.0, "rope_type": "default"})
    exp = hook.Experiment()
    assert exp.unavailable(_ctx(tmp_path, target, bad)) is None
    res = exp.run(_ctx(tmp_path, target, bad), ALL)
    by = _by(res)
    for hid in ("draft-config-mismatch", "rope-sync"):
        f = by[hid]
        assert f.verdict is Verdict.INCONCLUSIVE, f   # a difference is never a verdict
        assert "1000.0" in f.evidence and "10000.0" in f.evidence, f.evidence
        assert "rope" in f.evidence
    assert not any(f.verdict is Verdict.CONFIRMED for f in res.findings), res.to_json()
    assert not any(f.verdict is Verdict.EXCLUDED for f in res.findings), res.to_json()


def test_a_matching_copy_gives_no_lead(tmp_path, pair):
    target, draft = pair
    same = _copy(tmp_path, draft)
    res = hook.Experiment().run(_ctx(tmp_path, target, same), ALL)
    assert res.findings == [], res.to_json()   # and a match excludes nothing either
    rope = [f for f in res.numbers["models"]["findings"] if f["check"] == "rope"]
    assert [f["level"] for f in rope] == ["ok"]   # the audit did compare the rope


def test_a_vocabulary_that_differs_is_evidence_for_tokenizer_mismatch(tmp_path, pair):
    target, draft = pair
    bad = _copy(tmp_path, draft, vocab_size=2048)
    f = _by(hook.Experiment().run(_ctx(tmp_path, target, bad), ALL))["tokenizer-mismatch"]
    assert f.verdict is Verdict.INCONCLUSIVE and "2048" in f.evidence and "1024" in f.evidence


def test_capture_sizes_below_k_plus_one_confirm_the_capture_size_cause(tmp_path, pair):
    target, draft = pair
    cc = json.dumps({"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 4})
    res = hook.Experiment().run(_ctx(tmp_path, target, draft, k=4,
                                     argv=("--compilation-config", cc)), ALL)
    f = _by(res)["cudagraph-capture-size"]
    assert f.verdict is Verdict.CONFIRMED and "k+1 = 5" in f.evidence
    assert "refuses to start" in f.evidence
    # the same sizes at k=3 (k+1 = 4 fits) confirm nothing
    ok = hook.Experiment().run(_ctx(tmp_path, target, draft, k=3,
                                    argv=("--max-cudagraph-capture-size", "4")), ALL)
    assert "cudagraph-capture-size" not in _by(ok)


def test_a_start_up_log_failure_confirms_and_feature_warnings_are_kept(tmp_path, pair):
    target, draft = pair
    log = ("WARNING 11-30 [logits_processor] min_p and logit_bias parameters won't work with "
           "speculative decoding.\nERROR 11-30 ValueError: No valid cudagraph sizes for k=4\n")
    res = hook.Experiment().run(_ctx(tmp_path, target, draft, logs=log), ALL)
    assert _by(res)["cudagraph-capture-size"].verdict is Verdict.CONFIRMED
    assert any("min_p" in lint["evidence"] for lint in res.numbers["lints"])


def test_k_past_the_trained_block_is_a_lead_for_k_beyond_training():
    fs = hook.lint_findings(lints.lint_block_size(7, 4))
    assert [(f.hypothesis, f.verdict) for f in fs] == [("k-beyond-training", Verdict.INCONCLUSIVE)]
    assert hook.lint_findings(lints.lint_block_size(3, 8)) == []


def test_sharded_layout_is_read_from_the_launch():
    launch = LaunchSpec(("vllm", "serve", "m", "-tp", "4", "--decode-context-parallel-size", "2",
                     "--prefill-context-parallel-size", "1"))
    assert hook.parallel_layout(launch) == {"tensor_parallel_size": 4,
                                            "decode_context_parallel_size": 2}
    assert hook.parallel_layout(LaunchSpec(("vllm", "serve", "m"))) == {}


def test_a_draft_that_loses_dcp_is_a_structural_lead_with_citations():
    from specdoctor.experiments.config_audit import parallel as p

    lost = p.MethodResult("mtp", "vllm.v1.spec_decode.eagle.EagleProposer._create_draft_vllm_config",
                          [p.FieldDiff("decode_context_parallel_size", "2", "1")])
    audit = p.ParallelAudit("0.32.0", ["decode_context_parallel_size"],
                            [p.VariationResult("launch", {}, methods=[lost])])
    (f,) = hook.parallel_findings(audit, "mtp", {"decode_context_parallel_size": 2})
    assert f.hypothesis == "draft-parallel-config" and f.verdict is Verdict.INCONCLUSIVE
    assert "decode_context_parallel_size target 2 vs draft 1" in f.evidence
    if __import__("importlib").util.find_spec("vllm") is not None:
        import hashlib
        from pathlib import Path

        root = Path(__import__("importlib").util.find_spec("vllm").submodule_search_locations[0])
        want = {rel: hashlib.sha256((root.parent / rel).read_bytes()).hexdigest()
                for rel in ("vllm/config/speculative.py", "vllm/v1/spec_decode/eagle.py")}
        assert {c["file"]: c["sha256"] for c in f.citations} == want
    kept = p.MethodResult("mtp", "x", [], shares_target=True)
    audit.variations[0].methods = [kept]
    (g,) = hook.parallel_findings(audit, "mtp", {"decode_context_parallel_size": 2})
    assert "no structural lead" in g.evidence and "target's own ParallelConfig" in g.evidence


@pytest.mark.skipif(__import__("importlib").util.find_spec("vllm") is None,
                    reason="the parallel audit reads the installed vLLM")
def test_a_sharded_launch_runs_the_parallel_audit_with_the_installed_vllm(tmp_path):
    from specdoctor.lab import drafters

    served = drafters.serve("dflash", control="pos0")
    launch = LaunchSpec(("vllm", "serve", str(served.target), "-tp", "4", "-dcp", "2",
                     "--speculative-config", json.dumps({"method": "dflash",
                                                         "model": str(served.draft),
                                                         "num_speculative_tokens": 3})))
    ctx = Context(workdir=tmp_path, launch=launch, method="dflash", k=3,
                  target_dir=served.target, draft_dir=served.draft)
    res = hook.Experiment().run(ctx, ("draft-parallel-config",))
    (f,) = res.findings
    assert f.verdict is Verdict.INCONCLUSIVE and "DFlashProposer" in f.evidence, f.evidence
    assert "'decode_context_parallel_size': 2" in f.evidence
    assert {c["file"] for c in f.citations} == {"vllm/config/speculative.py",
                                                "vllm/v1/spec_decode/dflash.py"}
    (var,) = res.numbers["parallel"]["variations"]
    assert var["target_args"] == {"tensor_parallel_size": 4, "decode_context_parallel_size": 2}
    # unsharded: the audit does not run
    plain = hook.Experiment().run(_ctx(tmp_path, served.target, served.draft), ("draft-parallel-config",))
    assert "parallel" not in plain.numbers


def test_a_missing_model_directory_is_recorded_not_raised(tmp_path, pair):
    target, _ = pair
    res = hook.Experiment().run(_ctx(tmp_path, target, tmp_path / "nowhere"), ALL)
    assert res.error and "model audit" in res.error



def test_dflash_window_fault_is_an_attention_mask_lead_and_k_past_the_block_too(tmp_path):
    from specdoctor.lab import drafters, faults

    served = faults.get("dflash-window").apply(drafters.serve("dflash", control="pos0"))
    ctx = Context(workdir=tmp_path, method="dflash", k=5, target_dir=served.target,
                  draft_dir=served.draft)
    by = _by(hook.Experiment().run(ctx, ALL))
    mask = by["attention-mask"]
    assert mask.verdict is Verdict.INCONCLUSIVE and '"swa": 4' in mask.evidence, mask.evidence
    assert "vs target null" in mask.evidence
    depth = by["k-beyond-training"]   # the control drafter's block is 4: k=5 asks for 6
    assert depth.verdict is Verdict.INCONCLUSIVE and "block_size 4" in depth.evidence
    assert set(by) == {"attention-mask", "k-beyond-training"}, by
