"""The seeds' verdict experiments as diagnose runs them, on the real lab, one setup at a time.

    python benchmarks/verdict_experiments.py [--only NAME ...]

Setups (each a lab server's launch; experiments called as the diagnosis calls them, through
the same Context and launcher, hypotheses as the catalogue lists them):

- ``dflash``: the trained DFlash drafter as the lab serves it. One relaunch (the fresh-state
  launch group: fresh compile cache, startup probe pack) for the probes; then masks (from the
  live view), astexec (the installed engine's functions on the served config) and
  kernel-equivalence (vLLM's CPU op at the served shapes), which start no server.
- ``dflash-window``: the same drafter served with a 4-token window (the lab fault): the same
  four experiments on its relaunch.
- ``precision``: the self-drafting lab server with its target at bfloat16; target-precision-ab
  measures it as served and relaunched at float32 (two boots).

Writes benchmarks/results/verdict_experiments.{json,txt}: per experiment its verdicts, evidence,
leads and wall time, with the commit, date, machine and load average. Not a test: four to five
boots (~2 minutes each on 2 idle cores, several times that when the cores are shared).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _provenance import git_commit, load, machine, utc_now

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SETUPS = ("dflash", "dflash-window", "precision")


def _ctx(launch: Any, workdir: Path, prompts: int, max_tokens: int) -> Any:
    from specdoctor.bench.prompts import take
    from specdoctor.experiments import common
    from specdoctor.experiments.base import Context
    from specdoctor.launch import Servers

    s = common.settings(launch)
    return Context(workdir=workdir, launch=launch, launcher=Servers(timeout_s=2400), settings=s,
                   method=s.method, k=s.k, target_dir=s.target, draft_dir=s.draft,
                   tokenizer_dir=s.tokenizer, prompts=tuple(take("code", prompts)),
                   max_tokens=max_tokens, progress=lambda m: print("  " + m, file=sys.stderr))


def _row(setup: str, exp_id: str, res: Any, loadavg: tuple[float, float]) -> dict[str, Any]:
    return {"setup": setup, "experiment": exp_id, "wall_s": round(res.wall_s, 1),
            "load_before_after": list(loadavg), "error": res.error,
            "findings": [f.to_json() for f in res.findings],
            "leads": res.numbers.get("leads", []),
            "numbers": {k: v for k, v in res.numbers.items()
                        if k in ("accepted_per_draft_with_probes", "source", "backend_source",
                                 "impls", "cases", "control_caught", "tolerance", "seconds",
                                 "served_dtype", "quantization", "read_from", "before",
                                 "after")}}


def _run(setup: str, ctx: Any, plan: list[tuple[Any, tuple[str, ...]]]) -> list[dict[str, Any]]:
    rows = []
    try:
        for exp, hyps in plan:
            print(f"{setup}: {exp.id} → {', '.join(hyps)}", file=sys.stderr)
            before = load()
            why = exp.unavailable(ctx)
            if why is not None:
                rows.append({"setup": setup, "experiment": exp.id, "unavailable": why})
                continue
            res = exp.run(ctx, hyps)
            rows.append(_row(setup, exp.id, res, (before, load())))
            print(json.dumps(rows[-1]["findings"])[:600], file=sys.stderr)
    finally:
        ctx.launcher.stop_all()
    return rows


def dflash(fault: str | None, work: Path) -> list[dict[str, Any]]:
    from specdoctor.experiments.astexec.experiment import Experiment as AstExec
    from specdoctor.experiments.kernels.experiment import Experiment as Kernels
    from specdoctor.experiments.masks.experiment import Experiment as Masks
    from specdoctor.experiments.probes.experiment import Experiment as Probes
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port

    launch = labmod.lab_spec("dflash", 3, free_port(), fault=fault)
    ctx = _ctx(launch, work, prompts=4, max_tokens=32)
    return _run(fault or "dflash", ctx, [
        (Probes(), ("draft-parallel-config", "rope-sync")),
        (Masks(), ("attention-mask",)),
        (AstExec(), ("attention-mask", "draft-config-mismatch")),
        (Kernels(), ("kernel-numerics",))])


def precision(work: Path) -> list[dict[str, Any]]:
    from specdoctor.experiments.precision import Experiment
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port

    launch = labmod.lab_spec("draft_model", 4, free_port()).with_arg("--dtype", "bfloat16")
    ctx = _ctx(launch, work, prompts=8, max_tokens=48)
    return _run("precision", ctx, [(Experiment(), ("target-hidden-noise",))])


def text(out: dict[str, Any]) -> str:
    lines = [f"# {out['commit']} {out['date']} {out['machine']}", ""]
    for r in out["rows"]:
        head = f"{r['setup']:>14} {r['experiment']:<20}"
        if "unavailable" in r:
            lines.append(f"{head} not run: {r['unavailable']}")
            continue
        lines.append(f"{head} {r['wall_s']:>6.1f} s (load {r['load_before_after'][0]}→"
                     f"{r['load_before_after'][1]})")
        for f in r["findings"]:
            lines.append(f"{'':>16}{f['hypothesis']}: {f['verdict']}: {f['evidence']}")
        for lead in r["leads"]:
            lines.append(f"{'':>16}lead → {lead['hypothesis']}: {lead['field']} = "
                         f"{'(removed)' if lead['remove'] else json.dumps(lead['value'])}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=SETUPS, default=list(SETUPS))
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
                           "rows": []}
    with tempfile.TemporaryDirectory(prefix="verdict-experiments-") as tmp:
        for setup in args.only:
            work = Path(tmp) / setup
            work.mkdir()
            out["rows"] += (precision(work) if setup == "precision" else
                            dflash(None if setup == "dflash" else setup, work))
    RESULTS.mkdir(parents=True, exist_ok=True)
    from specdoctor.paths import home, models_dir

    import sysconfig

    raw = json.dumps(out, indent=2)
    for path, name in ((str(models_dir()), "$SPECDOCTOR_MODELS"), (str(home()), "$SPECDOCTOR_HOME"),
                       (sysconfig.get_paths()["purelib"], "$SITE_PACKAGES"),
                       (tempfile.gettempdir(), "$TMPDIR")):
        raw = raw.replace(path, name)
    (RESULTS / "verdict_experiments.json").write_text(raw + "\n")
    (RESULTS / "verdict_experiments.txt").write_text(text(json.loads(raw)))
    print(text(json.loads(raw)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
