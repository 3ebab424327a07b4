"""Does a clinic case bite? Each case measured beside its healthy twin, on real vLLM.

    python benchmarks/clinic/measure.py --cases up-draft-positions-ahead,healthy-self
    python benchmarks/clinic/measure.py --render        # only rewrite the .md from the .json
    python benchmarks/clinic/measure.py --cases CASE --concurrency 8   # also at 8 in flight

For every named case (and, for a case with a ``twin``, that twin, measured once per
invocation), the case's own setup (``patients``/``upstream``: the very argv and env the clinic
gives diagnose) is started, measured with specdoctor's protocol (the "code" prompts, one
warm-up request, 16 prompts x 64 tokens, at each of the case's sampling modes), and stopped;
one server at a time.

A case *bites* when a paired difference against its twin (the same prompts, bootstrap over
prompts, 95%) excludes zero: of accepted tokens per draft, or of accepted tokens per output
token (the share of the output that came from accepted drafts, which also counts drafts that
were never made: prompt lookup proposes only where it finds a match). ``--render --recompare``
recomputes the differences from the stored per-request counts. A case that does not bite keeps
answer null, or is dropped, with the reason (upstream.py says which).

Writes benchmarks/results/clinic_measured.json (every row with its run: commit, date, machine,
load average before and after, and the sha256 of the weights each server read) and
clinic_measured.md (the table docs/clinic.md cites). Not a test: two servers per case, about
two minutes each on 2 cores, longer under load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

ROOT = HERE.parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "clinic_measured.json"
N, MAX_TOKENS = 16, 64


def weights_sha(argv: list[str]) -> dict[str, str]:
    """sha256 (first 16 hex) of every model.safetensors (or GGUF file) the server reads."""
    out: dict[str, str] = {}
    if "--model" not in argv:   # llama-server: -m T.gguf -md D.gguf
        for flag in ("-m", "-md"):
            if flag in argv:
                f = Path(argv[argv.index(flag) + 1])
                out[f"{flag}:{f.parent.name}"] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
        return out
    dirs = [argv[argv.index("--model") + 1]]
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    if spec.get("model"):
        dirs.append(spec["model"])
    for d in dirs:
        f = Path(d) / "model.safetensors"
        if f.is_file():
            out[Path(d).name] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
    return out


def sampling_params(mode: str) -> tuple[float, float]:
    if mode == "greedy":
        return 0.0, 1.0
    if mode == "official":
        return 1.0, 0.95
    t, p = mode.split(",")
    return float(t), float(p)


def measure_setup(name: str, build: Any, tmp: Path, passes: int = 1,
                  concurrency: int = 1) -> dict[str, Any]:
    """Start the case's server, measure it at each of its sampling modes (``passes`` times in
    a row over the same prompts: pass 2 is keyed ``MODE#2``), and, with ``concurrency`` > 1,
    once more per mode with that many requests in flight (keyed ``MODE@cN``: totals only, the
    clinic's servers give no per-request metrics to pair), stop it."""
    import patients
    from specdoctor.bench import measure as proto
    from specdoctor.launch import LaunchSpec, free_port, start, stop, wait_ready

    setup = build(tmp)
    port = free_port()
    argv = (*patients.command(setup, sys.executable), "--port", str(port))
    env = patients.launch_env(setup, tmp)
    spec = LaunchSpec(argv=argv, env=env, port=port, label=f"clinic-measure {name}")
    row: dict[str, Any] = {"case": name, "weights": weights_sha(list(setup.argv_tail)),
                           "load": [round(os.getloadavg()[0], 2)], "modes": {}}
    t0 = time.perf_counter()
    handle = start(spec, tmp / "server.log", die_with_parent=True)
    try:
        wait_ready(handle, timeout_s=1800)
        row["boot_s"] = round(time.perf_counter() - t0, 1)
        modes = [m + (f"#{i + 1}" if i else "") for i in range(passes) for m in setup.sampling]
        if concurrency > 1:
            modes += [f"{m}@c{concurrency}" for m in setup.sampling]
        for mode in modes:
            temperature, top_p = sampling_params(mode.split("#")[0].split("@")[0])
            c = int(mode.split("@c")[1]) if "@c" in mode else 1
            m = proto.measure(spec.url, proto.MeasureParams(num_prompts=N, max_tokens=MAX_TOKENS,
                                                           temperature=temperature,
                                                           top_p=top_p, concurrency=c))
            t = m.total
            row["modes"][mode] = {
                "per_position": ([round(x, 4) for x in t.per_position]
                                 if t and t.per_position else None),
                "mean_acceptance_length": round(t.mean_acceptance_length, 4) if t else None,
                "drafts": t.drafts if t else None,
                "ci95": {k: iv.to_json() for k, iv in t.intervals.items()} if t else {},
                "output_tok_s": round(m.output_tok_s or 0.0, 2),
                "per_request": [r.to_json() for r in m.requests], "error": m.error}
    except Exception as exc:  # noqa: BLE001 - a case that kills its server is a result too
        row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        stop(handle)
        row["load"].append(round(os.getloadavg()[0], 2))
    return row


def ratio(reqs: list[dict[str, Any]], idx: list[int], per: str) -> float:
    """Accepted tokens over ``per`` (``drafts``, or ``completion_tokens``: the share of the
    output that came from accepted drafts) summed over the requests ``idx``."""
    den = sum(reqs[i].get(per) or 0 for i in idx)
    acc = sum(reqs[i].get("accepted_tokens") or 0 for i in idx)
    return acc / den if den else 0.0


def per_draft(reqs: list[dict[str, Any]], idx: list[int]) -> float:
    return ratio(reqs, idx, "drafts")


def paired_difference(case: list[dict[str, Any]], twin: list[dict[str, Any]],
                      rounds: int = 4000, seed: int = 0, per: str = "drafts") -> dict[str, Any]:
    """Accepted tokens per draft (or per output token), case minus twin, with a 95% bootstrap
    interval over prompts (the same prompts on both sides, resampled together). Pure."""
    n = min(len(case), len(twin))
    idx = list(range(n))
    point = ratio(case, idx, per) - ratio(twin, idx, per)
    rng = random.Random(seed)
    diffs = sorted(ratio(case, s, per) - ratio(twin, s, per)
                   for s in ([rng.randrange(n) for _ in idx] for _ in range(rounds)))
    lo, hi = diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]
    return {"case": round(ratio(case, idx, per), 4), "twin": round(ratio(twin, idx, per), 4),
            "difference": round(point, 4), "ci95": [round(lo, 4), round(hi, 4)],
            "bites": lo > 0 or hi < 0, "prompts": n}


def compare(rows: dict[str, dict[str, Any]], case: str, twin: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, m in rows[case].get("modes", {}).items():
        t = rows.get(twin, {}).get("modes", {}).get(mode)
        # a mode at concurrency > 1 has no per-request counts to pair (totals only)
        if t and m.get("per_request") and t.get("per_request") and "@c" not in mode:
            out[mode] = paired_difference(m["per_request"], t["per_request"])
            # a drafter whose drafts vary in number (prompt lookup) can lose drafts, not only
            # acceptance: the share of the output that came from accepted drafts shows both
            out[mode]["per_output_token"] = paired_difference(
                m["per_request"], t["per_request"], per="completion_tokens")
    return out


def _diff(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    return (f"{d['case']:.3f} - {d['twin']:.3f} = {d['difference']:+.3f} "
            f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]")


def _pp(m: dict[str, Any] | None) -> str:
    if not m or m.get("mean_acceptance_length") is None:
        return "-"
    ci = m.get("ci95") or {}
    # llama-server counts drafts and accepted tokens, not each position
    per = " / ".join(f"{x:.3f}" for x in m["per_position"]) + " " if m.get("per_position") \
        else f"{m.get('drafts')} drafts "
    return per + (
        f"(MAL {m['mean_acceptance_length']:.2f}" + (
            f" [{ci['mean_acceptance_length'][0]:.2f}, {ci['mean_acceptance_length'][1]:.2f}])"
            if ci.get("mean_acceptance_length") else ")"))


def markdown(data: dict[str, Any]) -> str:
    from families import FAMILY_CASES
    from llamacpp_cases import LLAMACPP_CASES
    from upstream import UPSTREAM_CASES

    rows = {r["case"]: r for r in data["rows"]}
    lines = ["# Clinic cases against their healthy twins", "",
             "Written by `python benchmarks/clinic/measure.py` (clinic_measured.json). Each case "
             f"and its twin served as the clinic serves them, greedy unless noted, {N} code "
             f"prompts x {MAX_TOKENS} tokens; per-position rates unconditional; accepted per "
             "draft is the paired difference over the same prompts with its 95% bootstrap "
             "interval. Load is the 1-minute load average before/after each server (2 cores).",
             "",
             "| case | mode | case per position (MAL [95%]) | twin | twin per position | "
             "accepted/draft case - twin [95%] | accepted/output token case - twin [95%] | "
             "bites | load | run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in [*UPSTREAM_CASES, *FAMILY_CASES, *LLAMACPP_CASES]:
        r = rows.get(c.name)
        if r is None:
            continue
        t = rows.get(c.twin or "", {})
        if r.get("error"):
            lines.append(f"| {c.name} | - | failed: {r['error'][:80]} | {c.twin} | | | | "
                         f"{r['load']} | {r['run']['commit']} {r['run']['date']} |")
            continue
        for mode, m in r["modes"].items():
            d = (r.get("vs_twin") or {}).get(mode)
            tok = (d or {}).get("per_output_token")
            bites = ("yes" if d["bites"] or (tok or {}).get("bites") else "**no**") if d else "-"
            lines.append(f"| {c.name} | {mode} | {_pp(m)} | {c.twin} | "
                         f"{_pp(t.get('modes', {}).get(mode))} | {_diff(d)} | {_diff(tok)} | "
                         f"{bites} | "
                         f"{r['load']} | {r['run']['commit']} {r['run']['date']} |")
    notes = [r for r in data["rows"] if r.get("note")]
    if notes:
        lines += ["", "Earlier versions of a case, kept with what they showed:", ""]
        for r in notes:
            modes = "; ".join(f"{m}: {_pp(v)}" for m, v in r.get("modes", {}).items())
            lines.append(f"- `{r['case']}` ({r['run']['commit']}, {r['run']['date']}, load "
                         f"{r['load']}): {modes}. {r['note']}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="", help="comma-separated case names (their twins too)")
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--recompare", action="store_true",
                    help="with --render: recompute every case's difference from its twin")
    ap.add_argument("--drafters", choices=("full", "ci"), default="full")
    ap.add_argument("--concurrency", type=int, default=1,
                    help="also measure each mode at this concurrency (a batch-dependent case)")
    ap.add_argument("--passes", type=int, default=1,
                    help="measure each mode this many times in a row on the same server (state "
                         "that builds up over requests shows in the later passes)")
    a = ap.parse_args(argv)
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"rows": []}
    if not a.render:
        import patients
        from _provenance import git_commit, machine, utc_now
        from run import CASES
        from families import TWINS as FAMILY_TWINS
        from upstream import TWINS

        patients.DRAFTER_BUDGET[0] = a.drafters
        builders = {c.name: c.build for c in CASES} | TWINS | FAMILY_TWINS
        twins = {c.name: c.twin for c in CASES if c.twin}
        names = [n for n in a.cases.split(",") if n]
        unknown = [n for n in names if n not in builders]
        if unknown:
            ap.error(f"unknown case {', '.join(unknown)}")
        todo: list[str] = []
        for n in names:
            for x in (twins.get(n), n):
                if x and x not in todo:
                    todo.append(x)
        run = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
               "drafters": a.drafters}
        rows = {r["case"]: r for r in data["rows"]}
        for n in todo:
            print(f"== {n}", file=sys.stderr, flush=True)
            tmp = Path(tempfile.mkdtemp(prefix="srv-"))
            rows[n] = {**measure_setup(n, builders[n], tmp, a.passes, a.concurrency),
                       "run": run}
            print(json.dumps({k: rows[n].get(k) for k in ("case", "load", "boot_s", "error")}
                             | {"modes": {m: v.get("per_position") for m, v in
                                          rows[n].get("modes", {}).items()}}),
                  file=sys.stderr, flush=True)
        for n in names:
            if twins.get(n) and n in rows:
                rows[n]["vs_twin"] = compare(rows, n, twins[n])
                print(json.dumps({n: rows[n]["vs_twin"]}), file=sys.stderr)
        data = {"about": "written by benchmarks/clinic/measure.py",
                "protocol": {"suite": "code", "num_prompts": N, "max_tokens": MAX_TOKENS},
                "rows": list(rows.values())}
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    if a.render and a.recompare:
        sys.path.insert(0, str(HERE))
        from run import CASES

        rows = {r["case"]: r for r in data["rows"]}
        for c in CASES:
            if c.twin and c.name in rows and c.twin in rows:
                rows[c.name]["vs_twin"] = compare(rows, c.name, c.twin)
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    RESULTS.with_suffix(".md").write_text(markdown(data))
    print(RESULTS.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
