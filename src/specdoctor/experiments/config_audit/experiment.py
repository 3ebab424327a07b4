"""The config audit as a static experiment of ``specdoctor diagnose`` (catalogue id
``config-audit``): no server, no measurement.

What it reads: the target and drafter directories and the method of the context (from the
launch command), the launch's own flags, and the start-up logs the diagnosis holds. What it runs:
``models.audit_models`` (tokenizer, ids, hidden size, aux layer ids, rope, window, DFlash
causality), the launch lints (cudagraph capture sizes against k+1, k against the drafter's
trained block, feature-disabling warnings in the log) and, when the launch shards the target
(TP > 1, decode or prefill context parallel), ``parallel.audit_parallel`` for the method in use.

How results map to verdicts, by the catalogue's rules:
- a config difference is a lead, never a verdict (``difference-not-verdict``,
  ``counterfactual-only``): rope, window, mask, aux layer ids and tokenizer differences come back
  *inconclusive*, the evidence naming the field and both values, so the counterfactual that
  decides them knows what to set;
- a field that matches excludes nothing: the catalogue gives no static rule that could;
- capture sizes that leave nothing once rounded to k+1 confirm ``cudagraph-capture-size``
  (vLLM refuses to start, "No valid cudagraph sizes");
- a draft that loses the target's decode-context-parallel size is evidence for
  ``draft-parallel-config`` (inconclusive: its verdict is the probes' measurement), with the vLLM
  files that decided it cited by sha256.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from specdoctor.errors import SpecdoctorError
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.config_audit import lints, models
from specdoctor.launch import LaunchSpec

# Audit checks → the hypotheses a difference there is a lead for.
CHECKS: dict[str, tuple[str, ...]] = {
    "rope": ("draft-config-mismatch", "rope-sync"),
    "attention window": ("attention-mask",),
    "dflash causality": ("attention-mask",),
    "aux layer ids": ("draft-config-mismatch",),
    "fc input": ("draft-config-mismatch",),
    "hidden_size": ("draft-config-mismatch",),
    "tokenizer": ("tokenizer-mismatch",),
    "vocab_size": ("tokenizer-mismatch",),
    "bos_token_id": ("tokenizer-mismatch",),
    "eos_token_id": ("tokenizer-mismatch",),
    "pad_token_id": ("tokenizer-mismatch",),
    "special token": ("tokenizer-mismatch",),
}
# Flags that shard the target (long and short spellings, as vLLM's argparse takes them).
PARALLEL_FLAGS: dict[str, tuple[str, ...]] = {
    "tensor_parallel_size": ("--tensor-parallel-size", "-tp"),
    "decode_context_parallel_size": ("--decode-context-parallel-size", "-dcp"),
    "prefill_context_parallel_size": ("--prefill-context-parallel-size", "-pcp"),
}
# The draft losing one of these under a sharded launch is Case B's mechanism.
CP_FIELDS = ("decode_context_parallel_size", "prefill_context_parallel_size",
             "dcp_kv_cache_interleave_size", "cp_kv_cache_interleave_size")


def model_findings(audit: models.ModelAudit) -> list[Finding]:
    """Suspects and problems of the model audit as leads (pure): never confirmed, never
    excluded — a difference only names the counterfactual to run."""
    out = []
    for f in audit.suspects():
        key = "special token" if f.check.startswith("special token") else f.check
        for hid in CHECKS.get(key, ()):
            out.append(Finding(hid, Verdict.INCONCLUSIVE, _lead(f)))
    return out


def _lead(f: models.ConfigCheck) -> str:
    values = f"draft {json.dumps(f.draft, default=str)} vs target {json.dumps(f.target, default=str)}"
    return (f"config audit ({f.level}): {f.check}: {values} — {f.detail}; a lead for the "
            f"counterfactual with the target's value, not a verdict")


def lint_findings(launch_lints: list[lints.Lint]) -> list[Finding]:
    """Launch lints as findings (pure)."""
    out = []
    for lint in launch_lints:
        text = f"{lint.check}: {lint.detail}" + (f" (log: {lint.evidence})" if lint.evidence else "")
        if lint.check == "cudagraph sizes" and lint.level == "problem":
            out.append(Finding("cudagraph-capture-size", Verdict.CONFIRMED, text))
        elif lint.check == "cudagraph sizes":
            out.append(Finding("cudagraph-capture-size", Verdict.INCONCLUSIVE, text))
        elif lint.check == "k vs trained block" and lint.level == "suspect":
            out.append(Finding("k-beyond-training", Verdict.INCONCLUSIVE,
                               text + "; the measured late positions decide (trained-depth)"))
        elif "No valid cudagraph sizes" in lint.evidence:
            out.append(Finding("cudagraph-capture-size", Verdict.CONFIRMED, text))
    return out


def capture_settings(launch: LaunchSpec) -> tuple[list[int] | None, int | None, int | None]:
    """Capture sizes, maximum capture size and max_num_seqs the launch sets (None: default)."""
    sizes: list[int] | None = None
    max_size: int | None = None
    raw = launch.arg("--compilation-config", "-cc")
    if raw:
        try:
            cc = json.loads(raw)
        except ValueError:
            cc = None
        if isinstance(cc, dict):
            if isinstance(cc.get("cudagraph_capture_sizes"), list):
                sizes = [int(s) for s in cc["cudagraph_capture_sizes"]]
            if isinstance(cc.get("max_cudagraph_capture_size"), int):
                max_size = int(cc["max_cudagraph_capture_size"])
    flag = launch.arg("--max-cudagraph-capture-size")
    if flag and flag.isdigit():
        max_size = int(flag)
    seqs = launch.arg("--max-num-seqs")
    return sizes, max_size, int(seqs) if seqs and seqs.isdigit() else None


def parallel_layout(launch: LaunchSpec) -> dict[str, int]:
    """The sharding sizes the launch sets above 1 (empty: an unsharded target)."""
    out: dict[str, int] = {}
    for name, flags in PARALLEL_FLAGS.items():
        v = launch.arg(*flags)
        if v and v.isdigit() and int(v) > 1:
            out[name] = int(v)
    return out


def parallel_findings(audit: Any, method: str, layout: dict[str, int]) -> list[Finding]:
    """The draft's parallel fields against the target's under this launch's layout."""
    out = []
    for var in audit.variations:
        if var.error:
            out.append(Finding("draft-parallel-config", Verdict.INCONCLUSIVE,
                               f"parallel audit of {layout}: {var.error}"))
        for m in var.methods:
            if m.method != method:
                continue
            lost = [d for d in m.lost if d.field in CP_FIELDS]
            if m.error:
                out.append(Finding("draft-parallel-config", Verdict.INCONCLUSIVE,
                                   f"parallel audit ({m.code}): {m.error}"))
            elif lost:
                shown = ", ".join(f"{d.field} target {d.target} vs draft {d.draft}" for d in lost)
                out.append(Finding(
                    "draft-parallel-config", Verdict.INCONCLUSIVE,
                    f"under {layout} vLLM {audit.vllm_version} gives the {method} draft another "
                    f"parallel config than its target ({m.code}): {shown}; the draft attends a "
                    f"sharded cache as if unsharded unless something else restores it — a "
                    f"structural lead, the probes decide", citations=_citations(m.code)))
            else:
                dropped = [d for d in var.dropped_by_create if d.field in CP_FIELDS]
                how = ("it runs with the target's own ParallelConfig" if m.shares_target else
                       "restored: " + ", ".join(m.restored) if m.restored else "kept")
                note = ("; create_draft_parallel_config drops " + ", ".join(
                    f"{d.field} {d.target} → {d.draft}" for d in dropped) if dropped else "")
                out.append(Finding(
                    "draft-parallel-config", Verdict.INCONCLUSIVE,
                    f"under {layout} vLLM {audit.vllm_version} gives the {method} draft the "
                    f"target's context-parallel fields ({m.code}: {how}{note}): no structural "
                    f"lead", citations=_citations(m.code)))
    return out


def _citations(code: str) -> tuple[dict[str, str], ...]:
    """The vLLM source files named by ``code`` with their sha256, where installed (found
    without importing them)."""
    out = []
    for mod in ("vllm.config.speculative", code.rsplit(".", 2)[0] if "." in code else ""):
        path = _source_file(mod) if mod else None
        if path is not None:
            out.append({"file": "/".join(mod.split(".")) + ".py",
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return tuple(out)


def _source_file(module: str) -> Path | None:
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)   # a top-level spec imports nothing
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations or not rest:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root, *rest[:-1], rest[-1] + ".py")
        if path.is_file():
            return path
    return None


class Experiment:
    id = "config-audit"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.target_dir is None and ctx.launch is None and not ctx.server_logs:
            return "needs the launch command, the model directories or the server's log"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        found: list[Finding] = []
        nums: dict[str, Any] = {}
        errors: list[str] = []
        method = ctx.method or "draft_model"
        if ctx.target_dir is not None and ctx.draft_dir is not None and method in models.METHODS:
            try:
                audit = models.audit_models(ctx.target_dir, ctx.draft_dir, method)
                nums["models"] = audit.to_json()
                found += model_findings(audit)
            except (SpecdoctorError, OSError, ValueError) as exc:
                errors.append(f"model audit: {exc}")
        launch_lints: list[lints.Lint] = []
        if ctx.launch is not None and ctx.k:
            sizes, max_size, seqs = capture_settings(ctx.launch)
            launch_lints += lints.lint_cudagraph(ctx.k, sizes, max_size, seqs)
        if ctx.k and ctx.draft_dir is not None and method == "dflash":
            block = _read_json(ctx.draft_dir / "config.json").get("block_size")
            launch_lints += lints.lint_block_size(ctx.k, block if isinstance(block, int) else None)
        for text in ctx.server_logs.values():
            launch_lints += lints.lint_log(text)
        nums["lints"] = [lint.to_json() for lint in launch_lints]
        found += lint_findings(launch_lints)
        layout = parallel_layout(ctx.launch) if ctx.launch is not None else {}
        if layout and ctx.method and "draft-parallel-config" in hypotheses:
            found += self._parallel(ctx, ctx.method, layout, nums, errors)
        mine = [f for f in found if f.hypothesis in hypotheses]
        return ExperimentResult(self.id, rules.one_per_hypothesis(mine), nums,
                                error="; ".join(errors) or None,
                                wall_s=time.perf_counter() - t0)

    def _parallel(self, ctx: Context, method: str, layout: dict[str, int],
                  nums: dict[str, Any], errors: list[str]) -> list[Finding]:
        from specdoctor.experiments.config_audit import parallel

        ctx.progress(f"config audit: the {method} draft's parallel config under {layout}")
        try:
            audit = parallel.audit_parallel(
                ctx.target_dir, variations=(parallel.Variation("launch", dict(layout)),),
                methods=(method,))
        except ImportError as exc:
            errors.append(f"parallel audit needs vLLM: {exc}")
            return [Finding("draft-parallel-config", Verdict.INCONCLUSIVE,
                            f"parallel audit not run: vLLM is not importable here ({exc})")]
        nums["parallel"] = audit.to_json()
        return parallel_findings(audit, method, layout)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
