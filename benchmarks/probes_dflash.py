"""Case A's three start-up lines on the lab's DFlash servers: healthy, dflash-causal, dflash-window.

    python benchmarks/probes_dflash.py [--control pos0]

Boots each server in turn with the ``dflash`` and ``startup`` packs (``lab up --patch …``), sends one
request so the engine runs a step, stops it, and keeps the pack's lines: per draft layer the
causality vLLM resolved, the aux (target) layer ids the drafter reads, and the attention window.
The healthy drafter must print the trained values (non-causal, no window, ids of its config plus
one); each fault its faulty value. Writes benchmarks/results/probes_dflash.json. Not a test:
three boots (~2 minutes each on 2 idle cores).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CASES = (None, "dflash-causal", "dflash-window")


def one(control: str, fault: str | None) -> dict[str, Any]:
    from specdoctor.lab import lab as labmod
    from specdoctor.launch import free_port
    from specdoctor.packs import run

    port = free_port()
    spec = labmod.lab_spec("dflash", None, port, control=control, fault=fault)
    spec = labmod.with_packs(spec, ("dflash", "startup"))
    t0 = time.monotonic()
    try:
        h = labmod.up(spec, timeout_s=1200)
        body = json.dumps({"model": "lab", "prompt": "def f(x):", "max_tokens": 8,
                           "temperature": 0}).encode()
        req = urllib.request.Request(spec.url + "/v1/completions", body,
                                     {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            served = r.status == 200
        lines = run.collect(h.log_path.read_text(errors="replace"))
    finally:
        labmod.down(port)
    pick = {}
    for ln in lines:
        pick.setdefault(ln.probe, [])
        if ln.data not in pick[ln.probe]:
            pick[ln.probe].append(ln.data)
    return {"fault": fault or "healthy", "served": served, "boot_and_request_s":
            round(time.monotonic() - t0, 1), "lines": pick}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--control", default="pos0")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    out: dict[str, Any] = {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                    time.gmtime()),
                           "control": args.control, "servers": []}
    for fault in CASES:
        print(f"booting dflash control={args.control} fault={fault or 'none'} …", file=sys.stderr)
        out["servers"].append(one(args.control, fault))
        print(json.dumps(out["servers"][-1]), file=sys.stderr)
    RESULTS.mkdir(parents=True, exist_ok=True)
    from specdoctor.paths import home

    text = json.dumps(out, indent=2).replace(str(home()), "$SPECDOCTOR_HOME")
    (RESULTS / "probes_dflash.json").write_text(text + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
