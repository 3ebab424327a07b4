"""The draft-attention taps as a verdict experiment of ``specdoctor diagnose`` (catalogue id
``taps``, hypotheses ``draft-attention-partial`` and ``draft-parallel-config``).

What it does: relaunch the user's command once (through the context's launcher, on a free port)
with the ``draft-attention-taps`` probe pack added to PYTHONPATH, send a few of the diagnosis'
prompts, then recompute every tapped call of the draft's attention in fp64 from the tapped
query and paged K/V, and compare the kernel's output with it head by head (``heads``).

- The pack goes AFTER whatever PYTHONPATH the launch already has: a runtime patch the user
  runs with is installed first, and the taps wrap it, so they see the output the draft's layer
  really returns (probe packs chain the next ``sitecustomize``; a plain one that does not chain
  keeps the pack out, which the evidence then says). The pack is built with ``SPECDOCTOR_TAPS``
  as its gate, so turning it on switches on no other pack the user has.
- Verdicts: a clear share of (row, head) cells off the reference confirms
  ``draft-attention-partial`` (evidence: how many heads, on which rows, max error per head);
  every cell within the float32-rounding tolerance excludes it; no tap fired (the proposer
  named no draft attention layer, another attention backend, the pack not loaded) or a launch
  that failed is inconclusive with the reason. The draft's layers come from the proposer
  (``SpecDecodeBaseProposer.load_model`` keeps them in ``_draft_attn_layer_names``), so every
  model-based drafter is reached: draft_model, EAGLE/EAGLE3, DFlash, MTP. Each call is recomputed
  with the layer's own mask as the engine resolved it (non-causal DFlash, windowed layers); a
  kernel given another causal flag than its layer resolves is a mask fault, not lost heads, so
  it leaves the hypothesis inconclusive with that said.
- ``draft-parallel-config`` needs a sharded target (TP, DCP or PCP above 1): on an unsharded
  launch the draft has no parallel config to lose, so it is excluded without a relaunch; on a
  sharded one the taps of each rank only see that rank's pages, so it stays inconclusive.

Cost: one restart plus a few short requests and the fp64 recomputation (seconds for the lab's
model). Expected failures never raise.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from specdoctor.bench import measure as proto
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.config_audit.experiment import parallel_layout
from specdoctor.experiments.taps import heads
from specdoctor.launch import LaunchSpec
from specdoctor.methods import LOOKUP_METHODS

HID = "draft-attention-partial"
PARALLEL = "draft-parallel-config"
PACK = "draft-attention-taps"
LAYERS_PROBE = "draft-attention-layers"  # the pack's probe that reports the proposer's layers
NO_ATTENTION = {"medusa": "Medusa heads are MLPs on the target's hidden state: no draft attention"}
NUM_PROMPTS = 2
MAX_TOKENS = 16
TAPS_MAX = 32                   # records per process
TAPS_MAX_BYTES = 64 << 20       # bytes per process


def parallel_finding(launch: LaunchSpec) -> Finding:
    layout = parallel_layout(launch)
    if not layout:
        return Finding(PARALLEL, Verdict.EXCLUDED,
                       "the launch shards nothing (no tensor, decode- or prefill-context parallel "
                       "size above 1): the draft has no parallel config to lose")
    shown = ", ".join(f"{k} {v}" for k, v in layout.items())
    return Finding(PARALLEL, Verdict.INCONCLUSIVE,
                   f"the launch shards the target ({shown}): each rank's taps hold only its own "
                   f"pages, so matching them does not clear the draft's parallel config; the "
                   f"probes decide")


def tapped_launch(launch: LaunchSpec, pack_dir: Path, tapdir: Path,
                  base_pythonpath: str | None = None, extra_path: str | None = None
                  ) -> LaunchSpec:
    """The launch with the taps on: its own PYTHONPATH first (a runtime patch there is installed
    first and so wrapped by the taps), then the pack, then ``extra_path`` (where the pack's
    handler imports specdoctor from)."""
    if base_pythonpath is not None:   # the one the server inherits, where the launch has none
        launch = launch.with_env(PYTHONPATH=base_pythonpath)
    launch = launch.with_pythonpath(pack_dir, prepend=False)
    if extra_path and extra_path not in launch.env["PYTHONPATH"].split(os.pathsep):
        launch = launch.with_pythonpath(extra_path, prepend=False)
    return launch.with_env(SPECDOCTOR_TAPS=str(tapdir), SPECDOCTOR_TAPS_MAX=str(TAPS_MAX),
                           SPECDOCTOR_TAPS_MAX_BYTES=str(TAPS_MAX_BYTES))


def non_chaining_sitecustomize(pythonpath: str) -> list[str]:
    """``sitecustomize.py`` files on a PYTHONPATH that are not probe packs: Python runs only the
    first, and a plain one does not run the next, so a pack after it never loads."""
    out = []
    for d in (p for p in pythonpath.split(os.pathsep) if p):
        if (Path(d) / "sitecustomize.py").is_file() and not (Path(d) / "pack.json").is_file():
            out.append(str(Path(d) / "sitecustomize.py"))
    return out


def no_taps_reason(lines: list[dict[str, Any]], pythonpath: str, method: str | None) -> str:
    """Why no record was written, from the pack's own ``[probe]`` lines (pure)."""
    errors = [str(x["error"]) for x in lines if "error" in x]
    live = [str(x["live"]) for x in lines if "live" in x]
    named = [str(n) for x in lines if "draft_layers" in x for n in x["draft_layers"]]
    reported = any("draft_layers" in x and "proposer" in x for x in lines)
    drafter = f"the {method} drafter" if method else "the drafter"
    if errors:
        return f"the taps pack reported: {errors[0][:300]}"
    if reported and not named:
        return (f"the proposer of {drafter} named no attention layer with a KV cache: there is "
                f"no draft attention to tap")
    if named:
        seen = f" (first attention layer seen: {live[0]})" if live else ""
        return (f"the proposer named the draft's attention layers ({', '.join(named[:4])}) but "
                f"none of them ran through vLLM's CPU attention{seen}")
    if live:
        return (f"the pack ran inside the server (first attention layer seen: {live[0]}) but "
                f"the proposer never reported {drafter}'s attention layers "
                f"(SpecDecodeBaseProposer.load_model did not run, or ran before the pack)")
    plain = non_chaining_sitecustomize(pythonpath)
    if plain:
        return (f"the taps pack printed nothing: {plain[0]} comes first on PYTHONPATH and does "
                f"not run the next sitecustomize, so the pack never loaded")
    return ("the taps pack printed nothing: the server never called vLLM's CPU attention "
            "(CPUAttentionBackendImpl.forward), the only kernel the pack taps, or its output "
            "did not reach the log")


def findings_from_taps(records: list[Any]) -> tuple[Finding, dict[str, Any], list[str]]:
    """The draft-attention-partial finding from tap records (``records.Record``), the summary's
    numbers, and the records that could not be compared (with why)."""
    from specdoctor.experiments.taps.attention import mask_disagreement, reference

    rows: list[heads.RecordHeads] = []
    skipped: list[str] = []
    mismatched = [m for m in (mask_disagreement(r) for r in records) if m]
    for rec in records:
        try:
            out, ref = reference(rec)
            rows.append(heads.record_heads(rec.label, rec.layer, out, ref,
                                           rec.tensors["cu_seqlens_q"].tolist(),
                                           rec.tensors["seqused_k"].tolist()))
        except (SpecdoctorError, ValueError, KeyError, RuntimeError) as exc:
            skipped.append(f"{rec.path.name}: {exc}")
    if not rows:
        why = skipped[0] if skipped else "no record"
        return (Finding(HID, Verdict.INCONCLUSIVE,
                        f"{len(records)} tap record(s), none comparable: {why}"), {}, skipped)
    s = heads.summarize(rows)
    verdict, text = heads.decide(s)
    if mismatched:
        verdict, text = "inconclusive", (
            f"{len(mismatched)} of {len(records)} tapped call(s) ran with another mask than "
            f"their layer resolves ({mismatched[0]}): a mask fault (attention-mask), which the "
            f"per-head comparison cannot tell from lost heads; {text}")
    if skipped:
        text += f"; {len(skipped)} record(s) not comparable (first: {skipped[0][:200]})"
    return Finding(HID, Verdict(verdict), text), s.to_json(), skipped


def _package_root() -> str | None:
    """The directory specdoctor is imported from, when it is a source tree (not site-packages,
    which must not go on another Python's path)."""
    import specdoctor

    root = Path(specdoctor.__file__).resolve().parent.parent
    return None if root.name in ("site-packages", "dist-packages") else str(root)


class Experiment:
    id = "taps"

    def unavailable(self, ctx: Context) -> str | None:
        why = common.relaunch_unavailable(ctx, "relaunch with the draft's attention tapped", "send")
        if why is not None:
            return why
        if ctx.method in LOOKUP_METHODS:
            return f"{ctx.method} drafts by prompt lookup: there is no draft attention to tap"
        if ctx.method in NO_ATTENTION:
            return NO_ATTENTION[str(ctx.method)]
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        assert ctx.launch is not None
        t0 = time.perf_counter()
        found: list[Finding] = []
        if PARALLEL in hypotheses:
            found.append(parallel_finding(ctx.launch))
        if HID not in hypotheses:
            return ExperimentResult(self.id, found, wall_s=time.perf_counter() - t0)
        stamp = f"{int(time.time())}-{os.getpid()}"
        pack_dir = self._build_pack(ctx.workdir / f"taps-pack-{stamp}")
        tapdir = ctx.workdir / f"taps-{stamp}"
        tapdir.mkdir(parents=True, exist_ok=True)
        launch = tapped_launch(ctx.launch, pack_dir, tapdir, extra_path=_package_root())
        cmds = [launch.shell_command(), f"specdoctor taps check {tapdir}"]
        few = dataclasses.replace(ctx, prompts=ctx.prompts[:NUM_PROMPTS])
        p = proto.MeasureParams(num_prompts=len(few.prompts), max_tokens=MAX_TOKENS,
                                suite=ctx.suite)
        m, log, err = common.measure_launch(few, launch, p, "taps")
        nums: dict[str, Any] = {"tapdir": str(tapdir), "prompts": len(few.prompts),
                                "max_tokens": MAX_TOKENS}
        if m is not None and m.total is not None:
            nums["accepted_per_draft_with_taps"] = round(common.apd(m.total), 4)
        files = sorted(tapdir.glob("*.safetensors"))
        nums["records"] = len(files)
        error = None
        if not files:
            from specdoctor.packs.run import collect

            lines = [ln.data for ln in collect(log) if ln.probe in (PACK, LAYERS_PROBE)]
            why = (f"the tapped launch did not measure: {err}; " if err else "")
            why += no_taps_reason(lines, launch.env.get("PYTHONPATH", ""), ctx.method)
            found.append(Finding(HID, Verdict.INCONCLUSIVE, f"no tap fired: {why}"))
            error = err
        else:
            from specdoctor.experiments.taps.records import load_dir

            try:
                f, summary, skipped = findings_from_taps(load_dir(tapdir))
            except SpecdoctorError as exc:
                f, summary, skipped = Finding(HID, Verdict.INCONCLUSIVE,
                                              f"the taps could not be read: {exc}"), {}, []
            found.append(f)
            nums["summary"] = summary
            nums["skipped"] = skipped[:5]
        return ExperimentResult(self.id, found, nums, commands=cmds, error=error,
                                wall_s=time.perf_counter() - t0)

    @staticmethod
    def _build_pack(out: Path) -> Path:
        from specdoctor.packs import shipped, spec
        from specdoctor.packs.build import build
        from specdoctor.packs.tap import ENV_DIR

        s = dataclasses.replace(spec.load(shipped.resolve(PACK)), gate=ENV_DIR)
        return build(s, out / "pack").dir
