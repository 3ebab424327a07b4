"""The clinic's answers at two commits, case by case (benchmarks/results/clinic.json).

    python benchmarks/clinic/compare_commits.py --before e184aa4 --after f101d60

For every case run at both commits (each case's latest row at each), its answer (root cause,
or none) and basis before and after, and whether they are the same. Where they differ, what
each answer's deciding ledger entry said, so the reason can be read. Writes the table to
stdout and to benchmarks/results/clinic_<before>_<after>.txt.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"


def rows_at(data: dict[str, Any], commit: str) -> dict[str, dict[str, Any]]:
    """Each case's latest row among the runs at ``commit``."""
    out: dict[str, dict[str, Any]] = {}
    for run in data["runs"]:
        if run.get("commit") == commit:
            for row in run["rows"]:
                out[row["case"]] = row
    return out


def answer(row: dict[str, Any]) -> str:
    return f"{row.get('root_cause') or 'none'} ({row.get('basis') or '-'})"


def deciding(row: dict[str, Any]) -> str:
    """The root cause's ledger evidence (its last line), or the first open candidate's."""
    ledger = row.get("ledger") or []
    want = row.get("root_cause")
    for e in ledger:
        if (want and e.get("id") == want) or (not want and e.get("verdict") == "inconclusive"):
            ev = e.get("evidence") or []
            return (ev[-1] if isinstance(ev, list) and ev else str(ev))[:300]
    return ""


def compare(data: dict[str, Any], before: str, after: str) -> list[str]:
    a, b = rows_at(data, before), rows_at(data, after)
    shared = [c for c in a if c in b]
    same = [c for c in shared if a[c].get("root_cause") == b[c].get("root_cause")]
    lines = [f"clinic answers at {before} and {after} (benchmarks/results/clinic.json): "
             f"{len(a)} cases at {before}, {len(b)} at {after}, {len(shared)} at both; "
             f"the same answer on {len(same)} of {len(shared)}", "",
             f"{'case':48} {'before':36} {'after':36} same"]
    for c in shared:
        lines.append(f"{c:48} {answer(a[c]):36} {answer(b[c]):36} "
                     f"{'yes' if c in same else 'NO'}")
    for c in shared:
        if c not in same:
            lines += ["", f"{c}:", f"  before: {deciding(a[c])}", f"  after:  {deciding(b[c])}"]
    only = [c for c in a if c not in b]
    if only:
        lines += ["", f"only at {before}: {', '.join(only)}"]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    a = ap.parse_args()
    data = json.loads((RESULTS / "clinic.json").read_text())
    text = "\n".join(compare(data, a.before, a.after)) + "\n"
    (RESULTS / f"clinic_{a.before}_{a.after}.txt").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
