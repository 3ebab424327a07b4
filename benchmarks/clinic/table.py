"""The clinic's scoreboard: every case's first answer and latest answer, from
benchmarks/results/clinic.json, as Markdown (benchmarks/results/clinic.md).

- The *first try* of a case is the first answer ever recorded for it (the earliest row of the
  case that holds a diagnosis, with its commit). For the ``upstream`` cases (real bugs of
  ``upstream.py``), each committed with its answer before its first diagnosis, first-try
  accuracy is reported apart from the ``dev`` cases the diagnosis was developed on.
- The *latest* answer is the last row of the case; each row names its commit, date, whether
  the tree was clean, and the load average around it.
- Categories are scored apart: ``fault`` (named right?), ``healthy`` and ``benign`` (any cause
  named is a false alarm), ``patched`` (served with a verdict patch: named right?).
- A fault measured beside its twin in its own run (``bites_here`` in run.py: its effect depends
  on the lab's drafter as the machine trained it) that made no difference there is listed
  apart, not scored: no cause is then the right answer.
- A lab fault the answer key leaves out (``KEY_LEFT_OUT``: run.py serves it in the ``benign``
  category because no profile can show its effect) is listed apart too: it is not a healthy or
  benign case, so its answer is neither a false alarm nor a quiet case.
- For the cases keyed with a ``part`` (where the loss lives: drafting, verification, drafter
  files, target, load, workload, none; the cases added from then on), first-try part accuracy
  and mechanism accuracy are reported apart; the part of an answer is read from its hypothesis
  through the examiner's map (``patients.PART_OF``), and an answer naming no cause has none.
- *The latest full run* is the run with the most rows (the last of those): every case of its
  time at one commit, scored as its rows were recorded.

Only the cases run.py defines today are shown (a case retired from it keeps its rows in the
json, not in the table).

    python benchmarks/clinic/table.py            # writes benchmarks/results/clinic.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "clinic.json"
OUT = RESULTS.with_suffix(".md")
# Lab faults served in the ``benign`` category with no cause in the answer key, because their
# effect lies inside the measurement's own interval (run.py's comment on the case; docs/lab.md).
KEY_LEFT_OUT = {
    "dflash-causal": "a lab fault (dflash_config.causal = true, src/specdoctor/lab/faults.py) "
                     "left out of the answer key: its effect lies inside the measurement's own "
                     "interval",
}


def rows_by_case(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every row of each case, oldest first, with its run's date, drafters and commit."""
    out: dict[str, list[dict[str, Any]]] = {}
    for run in data["runs"]:
        for row in run.get("rows", []):
            out.setdefault(row["case"], []).append(
                {**row, "date": run["date"], "drafters": run.get("drafters", "-"),
                 "commit": row.get("commit") or run.get("commit", "?"),
                 "clean": row.get("clean", run.get("clean"))})
    return out


def first_try(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The earliest row that holds an answer (a row that never finished is not an answer)."""
    return next((r for r in rows if "right" in r), None)


def _answer(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if "right" not in r:
        return f"not finished: {((r.get('error') or '').strip().splitlines() or ['?'])[-1][:60]}"
    basis = f" ({r['basis']})" if r.get("basis") else ""
    return f"{r.get('root_cause') or 'null'}{basis}"


def right(r: dict[str, Any] | None, expected: str | None) -> bool | None:
    """Whether a row's answer is the case's answer key as it stands (None: no answer)."""
    if r is None or "right" not in r:
        return None
    return r.get("root_cause") == expected


def inert(r: dict[str, Any] | None) -> bool:
    """A fault row measured beside its twin on its machine (run.py ``bites_here``) that made
    no difference there: no cause is then the right answer, and it is scored apart."""
    return ((r or {}).get("bites_here") or {}).get("bites") is False


def _bite_words(r: dict[str, Any]) -> str:
    b = r["bites_here"]
    a = b.get("accepted_per_draft") or {}
    return (f"{r['case']}: {a.get('case')} vs {b.get('twin_case')} {a.get('twin')} accepted per "
            f"draft, difference {b.get('difference'):+.3f} [{b['ci95'][0]:+.3f}, "
            f"{b['ci95'][1]:+.3f}]; answered {r.get('root_cause') or 'null'}")


def _mark(r: dict[str, Any] | None, expected: str | None) -> str:
    if inert(r):
        return "inert here"
    ok = right(r, expected)
    return "-" if ok is None else ("yes" if ok else "**no**")


def _share(pairs: list[tuple[dict[str, Any] | None, str | None]]) -> str:
    done = [right(r, e) for r, e in pairs if right(r, e) is not None]
    return f"{sum(done)}/{len(done)}"


def part_right(r: dict[str, Any] | None, part: str) -> bool | None:
    """Whether a row's answer names the case's part, read from its hypothesis through the
    examiner's map (``patients.part_of``); an answer naming no cause has no part, which is the
    right part only for a case whose part is "none" (None: no answer)."""
    from patients import part_of

    if r is None or "right" not in r:
        return None
    named = part_of(r.get("root_cause"))
    return named == part or (named is None and part == "none" and not r.get("root_cause"))


MEASURED = RESULTS.with_name("clinic_measured.json")


def measured_inert(measured: dict[str, Any] | None) -> set[str]:
    """Cases that ``measure.py`` measured beside their twin and that did not bite there (no
    mode's paired difference, per draft or per output token, excluded zero)."""
    out = set()
    for row in (measured or {}).get("rows", []):
        vs = row.get("vs_twin")
        if vs and not any(m.get("bites") or (m.get("per_output_token") or {}).get("bites")
                          for m in vs.values()):
            out.add(row["case"])
    return out


def part_scores(cases: list[Any], first: dict[str, dict[str, Any] | None],
                measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """First-try part accuracy and mechanism accuracy, apart, over the cases that carry a part
    (the cases keyed with one), a fault that did not bite beside its twin (in its own run, or
    measured by measure.py: ``measured``, clinic_measured.json) left out."""
    keyed = [c for c in cases if getattr(c, "part", None) is not None]
    tried = [(c, first.get(c.name)) for c in keyed
             if right(first.get(c.name), c.root_cause) is not None]
    quiet = measured_inert(measured)
    idle = [c.name for c, r in tried if inert(r) or c.name in quiet]
    scored = [(c, r) for c, r in tried if c.name not in idle]
    return {"keyed": len(keyed), "tried": len(scored), "idle": idle,
            "part": sum(bool(part_right(r, c.part)) for c, r in scored),
            "mechanism": sum(bool(right(r, c.root_cause)) for c, r in scored),
            "rows": [(c, r) for c, r in scored]}


def part_lines(cases: list[Any], first: dict[str, dict[str, Any] | None]) -> list[str]:
    """The scoreboard's section on part and mechanism, scored apart on the first try."""
    from patients import part_of

    measured = json.loads(MEASURED.read_text()) if MEASURED.is_file() else None
    s = part_scores(cases, first, measured)
    if not s["keyed"]:
        return []
    lines = ["", "## First try, part and mechanism apart", "",
             "Cases keyed with the part of the system where the loss lives (drafting, "
             "verification, drafter files, target, load, workload, none) beside the mechanism "
             "(the hypothesis). The part of an answer is read from its hypothesis through the "
             "examiner's map (`PART_OF` in `benchmarks/clinic/patients.py`); an answer that "
             "names no cause has no part.", "",
             f"First try on {s['tried']} of {s['keyed']} such cases: part right "
             f"**{s['part']}/{s['tried']}**, mechanism right **{s['mechanism']}/{s['tried']}**"
             + (f"; not scored (did not bite beside the twin): {', '.join(s['idle'])}"
                if s["idle"] else "") + ".", "",
             "| case | part | mechanism | first answer | its part | part right | "
             "mechanism right | commit |", "|---|---|---|---|---|---|---|---|"]
    for c, r in s["rows"]:
        lines.append(f"| {c.name} | {c.part} | {c.root_cause or 'null'} | {_answer(r)} | "
                     f"{part_of(r.get('root_cause')) or 'no part'} | "
                     f"{'yes' if part_right(r, c.part) else '**no**'} | "
                     f"{'yes' if right(r, c.root_cause) else '**no**'} | {r['commit']} |")
    return lines


def full_run(data: dict[str, Any], measured: dict[str, Any] | None = None,
             commit: str | None = None) -> dict[str, Any] | None:
    """The latest full run's scores: of the commits with the most cases run at them (a run
    at one commit may be recorded in several parts), the last; each case's latest row there,
    scored as recorded (category, right, bites_here), lab faults left out of the key apart."""
    run = full_run_rows(data, commit)
    if run is None:
        return None
    rows = [r for r in run["rows"] if "right" in r]

    def cat(*names: str) -> list[dict[str, Any]]:
        return [r for r in rows if r.get("category") in names and r["case"] not in KEY_LEFT_OUT]

    quiet_measured = measured_inert(measured)

    def idle(r: dict[str, Any]) -> bool:   # did not bite: in its own run, or beside its twin
        return inert(r) or r["case"] in quiet_measured

    faults = [r for r in cat("fault") if not idle(r)]
    quiet, patched = cat("healthy", "benign"), cat("patched")
    return {"commit": run.get("commit", "?"), "clean": run.get("clean"), "date": run["date"],
            "cases": len(run["rows"]), "answered": len(rows),
            "faults": (sum(bool(r["right"]) for r in faults), len(faults)),
            "quiet": (sum(r.get("root_cause") is not None for r in quiet), len(quiet)),
            "patched": (sum(bool(r["right"]) for r in patched), len(patched)),
            "idle": [r["case"] for r in rows if r.get("category") == "fault" and idle(r)],
            "left_out": [r["case"] for r in rows if r["case"] in KEY_LEFT_OUT]}


def full_run_rows(data: dict[str, Any], commit: str | None = None) -> dict[str, Any] | None:
    """The commit with the most cases run at it (the last of those; or ``commit``), as one
    run: its commit, whether every part ran on a clean tree, its first part's date and each
    case's latest row."""
    by_commit: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(data["runs"]):
        if not r.get("rows"):
            continue
        c = by_commit.setdefault(r.get("commit", "?"), {"commit": r.get("commit", "?"),
                                                        "clean": True, "date": r["date"],
                                                        "cases": {}, "last": i})
        c["clean"] = c["clean"] and r.get("clean") is True
        c["date"] = min(c["date"], r["date"])
        c["last"] = i
        for row in r["rows"]:
            c["cases"][row["case"]] = row
    if not by_commit or (commit is not None and commit not in by_commit):
        return None
    best = by_commit[commit] if commit is not None else max(
        by_commit.values(), key=lambda c: (len(c["cases"]), c["last"]))
    return {"commit": best["commit"], "clean": best["clean"], "date": best["date"],
            "rows": list(best["cases"].values())}


# Earlier full runs the docs quote (each scored as its rows were recorded)
EARLIER_FULL_RUNS = ("e184aa4",)


def full_run_lines(data: dict[str, Any]) -> list[str]:
    f = full_run(data, json.loads(MEASURED.read_text()) if MEASURED.is_file() else None)
    if f is None:
        return []
    tree = {True: "clean tree", False: "tree NOT clean"}.get(f["clean"], "tree not recorded")
    apart = [f"{len(f['idle'])} fault(s) that did not bite beside the twin (in their own run "
             f"or measured by measure.py) "
             f"({', '.join(f['idle'])})"] if f["idle"] else []
    apart += [f"{c}, {KEY_LEFT_OUT[c]}" for c in f["left_out"]]
    earlier = [full_run(data, None, c) for c in EARLIER_FULL_RUNS if c != f["commit"]]
    tail = ["", "Earlier full runs, scored as their rows were recorded (without measure.py's "
            "later measurements): " + "; ".join(
                f"at {e['commit']} (started {e['date']}): {e['cases']} cases, faults named "
                f"right: {e['faults'][0]} of {e['faults'][1]}, healthy or benign cases given a "
                f"cause: {e['quiet'][0]} of {e['quiet'][1]}, patched named right: "
                f"{e['patched'][0]} of {e['patched'][1]}" for e in earlier if e) + "."] \
        if any(earlier) else []
    return tail_first(f, tree, apart) + tail


def begun_lines(data: dict[str, Any], total: int) -> list[str]:
    """The run at the commit of the last recorded run, where that is not the latest full run
    and has not reached every case yet: how far it got, scored as the full run is, and how many
    of the causes it named state what they explain (``root_cause_explains``)."""
    runs = [r for r in data["runs"] if r.get("rows")]
    if not runs:
        return []
    last = runs[-1].get("commit")
    best = full_run_rows(data)
    rows = full_run_rows(data, last)
    if rows is None or best is None or best["commit"] == last or len(rows["rows"]) >= total:
        return []
    f = full_run(data, json.loads(MEASURED.read_text()) if MEASURED.is_file() else None, last)
    assert f is not None
    named = [r for r in rows["rows"] if r.get("root_cause")]
    sized = sum(r.get("root_cause_explains") is not None for r in named)
    tree = {True: "clean tree", False: "tree NOT clean"}.get(f["clean"], "tree not recorded")
    return ["", f"A full run begun at {last} ({tree}, started {f['date']}): {f['answered']} of "
                f"{total} cases answered so far. Faults named right: {f['faults'][0]} of "
                f"{f['faults'][1]}; healthy or benign cases given a cause: {f['quiet'][0]} of "
                f"{f['quiet'][1]}; patched named right: {f['patched'][0]} of "
                f"{f['patched'][1]}; named causes that state what they explain: {sized} of "
                f"{len(named)}."]


def tail_first(f: dict[str, Any], tree: str, apart: list[str]) -> list[str]:
    return ["", "## The latest full run", "",
            f"At {f['commit']} ({tree}, started {f['date']}): {f['cases']} cases, "
            f"{f['answered']} answered. Faults named right: {f['faults'][0]} of "
            f"{f['faults'][1]}; healthy or benign cases given a cause: {f['quiet'][0]} of "
            f"{f['quiet'][1]}; patched named right: {f['patched'][0]} of {f['patched'][1]}."
            + (f" Not scored: {'; '.join(apart)}." if apart else "")]


def render(cases: list[Any], by_case: dict[str, list[dict[str, Any]]],
           data: dict[str, Any] | None = None) -> str:
    data = data or {"runs": []}
    latest = {c.name: by_case[c.name][-1] for c in cases if c.name in by_case}
    first = {c.name: first_try(by_case[c.name]) for c in cases if c.name in by_case}
    walls = [r["diagnose_wall_s"] for r in latest.values() if "diagnose_wall_s" in r]
    lines = ["# Fault clinic: every case, first answer and latest", "",
             "Generated by `python benchmarks/clinic/table.py` from `clinic.json` (written by "
             "`benchmarks/clinic/run.py`). Machine: x86_64, 2 cores, shared with other work. "
             "Each row names its own commit.",
             "", "## Scores (latest answers)", ""]
    commits = {r["commit"] for r in latest.values()}
    runs = {(r["commit"], r["date"]) for r in latest.values()}
    if latest and len(commits) == 1 and len(latest) == len(cases):
        clean = all(r.get("clean") is not False for r in latest.values())
        began = min(r["date"] for r in latest.values())
        tree = "clean tree" if clean else "tree NOT clean"
        if len(runs) == 1:
            lines += [f"Every case's latest row is from one run at {commits.pop()} "
                      f"({tree}, started {began}).", ""]
        else:
            again = sum(1 for r in latest.values() if r["date"] != began)
            lines += [f"Every case's latest row is at one commit, {commits.pop()} ({tree}), "
                      f"from {len(runs)} runs: the first started {began}; {again} case(s) "
                      f"run again after it show that later answer (each row gives its date).",
                      ""]
    else:
        lines += [f"Cases were run in groups: the latest rows come from {len(commits)} "
                  f"commits; {len(cases) - len(latest)} of {len(cases)} cases never ran.", ""]
    for cat, what in (("fault", "named right"), ("patched", "named right"),
                      ("healthy", "false alarms"), ("benign", "false alarms")):
        for origin in ("dev", "upstream"):
            pairs = [(latest.get(c.name), c.root_cause) for c in cases
                     if c.category == cat and c.origin == origin]
            idle = [r for r, _ in pairs if inert(r)]
            left_out = [r for r, _ in pairs if r is not None and r["case"] in KEY_LEFT_OUT]
            pairs = [(r, e) for r, e in pairs if not inert(r) and r not in left_out]
            done = [r for r, e in pairs if right(r, e) is not None]
            if not done:
                continue
            if what == "false alarms":
                alarms = sum(r.get("root_cause") is not None for r in done)
                lines.append(f"- {cat} ({origin}): {alarms}/{len(done)} given a cause")
            else:
                lines.append(f"- {cat} ({origin}): {_share(pairs)} {what}")
            for r in idle:
                lines.append(f"  - not scored: measured beside its twin, it did not bite on "
                             f"this machine ({_bite_words(r)})")
            for r in left_out:
                lines.append(f"  - not scored: {r['case']}, {KEY_LEFT_OUT[r['case']]}; "
                             f"answered {r.get('root_cause') or 'null'}")
    lines += full_run_lines(data)
    lines += begun_lines(data, len(cases))
    up = [c for c in cases if c.origin == "upstream"]
    lines += ["", "## First try on the upstream cases", "",
              f"Each upstream case was committed with its answer before its first diagnosis. "
              f"First-try accuracy: **{_share([(first.get(c.name), c.root_cause) for c in up])}**"
              f" (latest: {_share([(latest.get(c.name), c.root_cause) for c in up])}); "
              f"{len([c for c in up if first.get(c.name) is None])} of {len(up)} not yet "
              f"diagnosed.", ""]
    if walls:
        lines += [f"Diagnose wall time (latest rows): {min(walls):.0f} to {max(walls):.0f} s "
                  "per case (target: under 600 s).", ""]
    lines += ["| case | category | origin | expected | first try | first-try commit | latest "
              "| right | signature | wall | load | commit | date |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        r, f = latest.get(c.name), first.get(c.name)
        if r is None:
            lines.append(f"| {c.name} | {c.category} | {c.origin} | {c.root_cause or 'null'} | "
                         "never run | | | | | | | | |")
            continue
        sig = (r.get("signature") or {}).get("class", "-")
        wall = f"{r['diagnose_wall_s']:.0f} s" if "diagnose_wall_s" in r else "-"
        load = "/".join(str(x) for x in r.get("load", [])) or "-"
        commit = r["commit"] + ("" if r.get("clean", True) is not False else "+dirty")
        lines.append(
            f"| {c.name} | {c.category} | {c.origin} | {c.root_cause or 'null'} | "
            f"{_answer(f)} {_mark(f, c.root_cause)} | {f['commit'] if f else '-'} | "
            f"{_answer(r)} | {_mark(r, c.root_cause)} | {sig} | {wall} | {load} | {commit} | {r['date']} |")
    lines += part_lines(cases, first)
    lines += ["", "## The upstream cases", "",
              "| case | reproduces | upstream mechanism | how the lab reproduces it |",
              "|---|---|---|---|"]
    for c in up:
        lines.append(f"| {c.name} | {c.cite} | {c.upstream} | {c.how} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from run import CASES

    data = json.loads(RESULTS.read_text())
    unknown = sorted(set(KEY_LEFT_OUT) - {c.name for c in CASES})
    if unknown:
        raise SystemExit(f"table.py: KEY_LEFT_OUT names cases run.py does not define: {unknown}")
    by_case = rows_by_case(data)
    OUT.write_text(render(CASES, by_case, data))
    missing = [c.name for c in CASES if c.name not in by_case]
    if missing:
        print(f"never run: {', '.join(missing)}", file=sys.stderr)
    print(OUT.read_text())


if __name__ == "__main__":
    main()
