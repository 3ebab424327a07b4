"""run_at.py's bookkeeping: which cases a commit still owes, and copying a sitting's runs
into the results without losing or doubling one."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks" / "clinic"))

from run_at import answered, merged  # noqa: E402


def _run(commit, date, cases, clean=True, right=True):
    rows = [{"case": c, **({"right": right} if right is not None else {"error": "x"})}
            for c in cases]
    return {"commit": commit, "date": date, "clean": clean, "rows": rows}


def test_a_commit_owes_the_cases_no_clean_answered_run_at_it_holds():
    data = {"runs": [_run("e5f66f1", "d1", ["a", "b"]), _run("e5f66f1", "d2", ["c"], clean=False),
                     _run("e5f66f1", "d3", ["d"], right=None), _run("f101d60", "d4", ["e"])]}
    assert answered(data, "e5f66f1") == {"a", "b"}


def test_a_sittings_runs_are_added_once_and_a_longer_copy_replaces_a_shorter():
    main = {"runs": [_run("x", "d1", ["a"]), _run("y", "d2", ["b"])]}
    sitting = {"runs": [_run("x", "d1", ["a"]), _run("y", "d2", ["b", "c"]),
                        _run("z", "d3", ["d"]), {"commit": "z", "date": "d4", "rows": []}]}
    out, n = merged(main, sitting)
    assert n == 2
    assert [(r["commit"], [x["case"] for x in r["rows"]]) for r in out["runs"]] == [
        ("x", ["a"]), ("y", ["b", "c"]), ("z", ["d"])]
    again, m = merged(out, sitting)
    assert m == 0 and again["runs"] == out["runs"]
