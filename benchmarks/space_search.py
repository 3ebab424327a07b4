"""The contract's space searched through the oracle on the lab's trained drafters, offline (no
server): drafters trained one way and served with a config that says another, where no
reference disagrees with the served value, beside the same drafters served as trained.

    python benchmarks/space_search.py

Each row is one served config: the drafter as the clinic trains it (``drafters.eagle3.trained``
with norm_output, ``drafters.dflash.trained`` with a sliding window), its config edited as the
row says, run through ``OracleCounterfactual`` on 8 code prompts x 48 tokens at k=3 (the
diagnosis' own defaults for the lab), the reference review first and the space after it. The
row gives what was confirmed, the space's best change and its figures. The drafters are built
into the lab's models cache on first use (seconds of training each).

Writes benchmarks/results/space_search.{json,txt}.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import ROOT, git_commit, utc_now  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "space_search"


def _drop(*keys: str) -> Any:
    def edit(c: dict[str, Any]) -> None:
        for key in keys:
            *parents, last = key.split(".")
            node = c
            for p in parents:
                node = node[p]
            node.pop(last)
    return edit


def _set(key: str, value: Any) -> Any:
    def edit(c: dict[str, Any]) -> None:
        *parents, last = key.split(".")
        node = c
        for p in parents:
            node = node[p]
        node[last] = value
    return edit


# (row, method, training options, config edit)
ROWS = [
    ("eagle3 norm_output: as trained", "eagle3", {"norm_output": True}, None),
    ("eagle3 norm_output: key removed", "eagle3", {"norm_output": True}, _drop("norm_output")),
    ("eagle3 norm_output: written false", "eagle3", {"norm_output": True},
     _set("norm_output", False)),
    ("eagle3 plain: norm_output true added", "eagle3", {}, _set("norm_output", True)),
    ("dflash window 8: as trained", "dflash", {"window": 8}, None),
    ("dflash window 8: window keys removed", "dflash", {"window": 8},
     _drop("dflash_config.use_swa", "dflash_config.swa_window_size")),
    ("dflash window 8: use_swa removed", "dflash", {"window": 8},
     _drop("dflash_config.use_swa")),
    ("dflash window 8: window written 32", "dflash", {"window": 8},
     _set("dflash_config.swa_window_size", 32)),
    ("dflash window 4: window keys removed", "dflash", {"window": 4},
     _drop("dflash_config.use_swa", "dflash_config.swa_window_size")),
]


def run_row(name: str, method: str, options: dict[str, Any], edit: Any, tmp: Path
            ) -> dict[str, Any]:
    import shutil

    from specdoctor.bench.prompts import take
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.common import Settings
    from specdoctor.experiments.counterfactual import OracleCounterfactual
    from specdoctor.lab.drafters import module, targets

    src = module(method).trained("full", **options)
    target = targets.llama("full") if method == "eagle3" else targets.qwen3("full")
    tok = targets.tokenizer_dir()
    draft = tmp / "served" / "draft"
    shutil.copytree(src, draft, ignore=shutil.ignore_patterns("specdoctor*"))
    if edit is not None:
        cfg = json.loads((draft / "config.json").read_text())
        edit(cfg)
        (draft / "config.json").write_text(json.dumps(cfg))
    ctx = Context(workdir=tmp / "work", method=method, k=3, target_dir=target, draft_dir=draft,
                  tokenizer_dir=tok, prompts=tuple(take("code", 8)), max_tokens=48,
                  settings=Settings(target, method, 3, draft, tok, (2, 4), "float32", 1024,
                                    "greedy"), suite="code")
    t0 = time.monotonic()
    r = OracleCounterfactual().run(ctx, ("draft-config-mismatch", "attention-mask"))
    space = (r.numbers.get("trials") or {}).get("space") or {}
    return {"row": name, "method": method, "wall_s": round(time.monotonic() - t0, 1),
            "confirmed": {f.hypothesis: f.evidence for f in r.findings
                          if f.verdict.value == "confirmed"},
            "verdicts": {f.hypothesis: f.verdict.value for f in r.findings},
            "space": {k: v for k, v in space.items() if k != "not_running"}}


def text(rows: list[dict[str, Any]], head: dict[str, Any]) -> str:
    lines = [f"contract space search: commit {head['commit']}, {head['date']}", ""]
    for r in rows:
        sp = r["space"]
        named = ", ".join(r["confirmed"]) or "nothing confirmed"
        lines.append(f"== {r['row']} ({r['method']}): {named} [{r['wall_s']} s]")
        for h, ev in r["confirmed"].items():
            lines.append(f"  {h}: {ev[:400]}")
        if sp.get("best"):
            lines.append(f"  space: {sp.get('scored')} scored of {sp.get('moves')}, best "
                         f"{sp['best']}: all prompts {sp.get('served_all')} -> "
                         f"{(sp.get('scores') or {}).get(sp['best'])}; held out "
                         f"{sp.get('half_b')}")
            if sp.get("also_rising"):
                lines.append(f"  also rising: {'; '.join(sp['also_rising'])}")
        elif sp:
            lines.append(f"  space: {sp.get('scored', 0)} scored of {sp.get('moves', 0)}")
        else:
            lines.append("  space: not searched (a reference lead recovered)")
    return "\n".join(lines) + "\n"


def main() -> int:
    head = {"commit": git_commit(), "date": utc_now()}
    rows = []
    for name, method, options, edit in ROWS:
        print(f"{name} …", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="space-") as tmp:
            rows.append(run_row(name, method, options, edit, Path(tmp)))
    RESULTS.with_suffix(".json").write_text(json.dumps({**head, "rows": rows}, indent=1) + "\n")
    out = text(rows, head)
    RESULTS.with_suffix(".txt").write_text(out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
