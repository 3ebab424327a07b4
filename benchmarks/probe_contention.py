"""How much the CPU probe of the speed comparison (``bench.probe.cpu_speed``) reads the server it
sits beside, rather than the machine.

diagnose times speculation on against speculation off and widens their ratio by the "drift" of
a CPU probe taken before and after each side's passes (``experiments.relaunch``). On one 2-core
machine the probes of quiet clinic runs moved by 43% to 63%, so no slowdown could be named.
This starts the default lab server (``specdoctor lab up``: vLLM on CPU), and on it, several
times over: the probe after the server sat idle, the probe at once after a pass of 8 greedy
requests (as diagnose takes it), and the same probe after a pause of 0.25, 1 and 3 s. Each
reading is given as a share of the idle reading of its round (min / median / max over rounds; each run is kept beside the earlier ones),
for the probe as diagnose takes it (the median of 5 runs of its workload) and for the fastest
of 9 runs.

    python benchmarks/probe_contention.py      # writes benchmarks/results/probe_contention.*
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import _provenance  # noqa: E402

PAUSES = (0.25, 1.0, 3.0)
PROMPTS = [f"def f{i}(x):\n    return" for i in range(8)]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=1200)


def _pass(url: str, model: str) -> None:
    for p in PROMPTS:
        body = json.dumps({"model": model, "prompt": p, "max_tokens": 48,
                           "temperature": 0.0}).encode()
        req = urllib.request.Request(f"{url}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=300).read()


def fastest(repeats: int = 9) -> float:
    """The probe's workload timed ``repeats`` times, the fastest run: what the machine gives
    when nothing preempts the probe for one run."""
    from specdoctor.bench.probe import WORK, _work

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        _work(WORK)
        best = min(best, time.perf_counter() - t0)
    return 1.0 / best


def main() -> None:
    from specdoctor.bench.probe import cpu_speed

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--port", type=int, default=8799)
    a = ap.parse_args()
    up = _cli("lab", "up", "--port", str(a.port), "--json")
    if up.returncode != 0:
        raise SystemExit(f"lab up failed: {up.stderr[-2000:]}")
    url = json.loads(up.stdout)["url"]
    phases = ["after a pass", *(f"after a pass and {p:g} s" for p in PAUSES)]
    probes = {"median of 5 (cpu_speed)": cpu_speed, "fastest of 9": fastest}
    rows: dict[str, dict[str, list[float]]] = {n: {ph: [] for ph in phases} for n in probes}
    try:
        model = json.loads(urllib.request.urlopen(f"{url}/v1/models").read())["data"][0]["id"]
        _pass(url, model)                       # warm-up
        for r in range(a.rounds):
            for name, speed in probes.items():
                time.sleep(5.0)
                idle = speed()
                for ph, pause in zip(phases, (None, *PAUSES)):
                    _pass(url, model)
                    if pause:
                        time.sleep(pause)
                    rows[name][ph].append(speed() / idle)
            print(f"round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
    finally:
        _cli("lab", "down", "--port", str(a.port))
    out = {"commit": _provenance.git_commit(), "date": _provenance.utc_now(),
           "machine": _provenance.machine(), "rounds": a.rounds,
           "rows": {n: {k: [round(x, 4) for x in v] for k, v in ph.items()}
                    for n, ph in rows.items()}}
    res = ROOT / "benchmarks" / "results"
    path = res / "probe_contention.json"
    runs = json.loads(path.read_text())["runs"] if path.is_file() else []
    runs.append(out)
    path.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    lines = []
    for run in runs:
        lines += [f"# CPU probe beside a vLLM server: {run['date']}, commit {run['commit']}",
                  f"# {run['machine']}; the default lab (draft_model, k=4); {run['rounds']} "
                  f"rounds",
                  "# probe speed as a share of the idle probe of the same round: min / median "
                  "/ max"]
        for name, ph in run["rows"].items():
            lines.append(f"{name}:")
            for k, v in ph.items():
                lines.append(f"  {k:26s} {min(v):.3f} / {statistics.median(v):.3f} / "
                             f"{max(v):.3f}")
        lines.append("")
    (res / "probe_contention.txt").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
