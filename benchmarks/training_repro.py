"""Is drafter training bit-reproducible, and what does it depend on?

    python benchmarks/training_repro.py

Trains one short drafter recipe (EAGLE3 and MTP heads, 24 steps on the control target's
text, as tests/lab/drafters/test_training.py does) in fresh processes, varying one thing at a
time, and prints the sha256 of the weights each run wrote:

- twice with nothing changed (the promise: same bytes);
- with torch's CPU kernels pinned to each vector capability this CPU supports
  (``ATEN_CPU_CAPABILITY=default|avx2|avx512``), standing in for machines with other CPUs;
- with 1 and 2 training threads (``FitRecipe.threads``).

Writes benchmarks/results/training_repro.txt. Not a test: about a minute per run on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "training_repro.txt"

TRAIN = """
import hashlib, sys, tempfile, torch
from dataclasses import replace
from pathlib import Path
from specdoctor.lab.drafters import cycle, eagle3, mtp, targets
from specdoctor.lab.drafters.fit import FitRecipe
m = {"eagle3": eagle3, "mtp": mtp}[sys.argv[1]]
r = replace(m.Recipe(), data=targets.DataRecipe(sequences=4, prompt_len=8, gen_len=16, batch=4),
            fit=FitRecipe(steps=24, batch=4, warmup=2, threads=int(sys.argv[2])))
d = Path(tempfile.mkdtemp())
m._train_into(d, cycle.target("llama"), r)
print(torch.backends.cpu.get_cpu_capability(),
      hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()[:16])
"""


def run(method: str, threads: int, capability: str | None) -> tuple[str, str]:
    env = dict(os.environ)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    out = subprocess.run([sys.executable, "-c", TRAIN, method, str(threads)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    return out[-2], out[-1]


def main() -> int:
    import torch

    from _provenance import git_commit, machine, utc_now

    lines = [f"training reproducibility (commit {git_commit()}, {utc_now()}; {machine()}, "
             f"torch {torch.__version__}, native capability "
             f"{torch.backends.cpu.get_cpu_capability()})",
             "sha256 (first 16) of model.safetensors after 24 training steps", ""]
    for method in ("eagle3", "mtp"):
        rows = [("native, 1 thread", run(method, 1, None)),
                ("native, 1 thread, again", run(method, 1, None)),
                ("native, 2 threads", run(method, 2, None))]
        for cap in ("default", "avx2", "avx512"):
            rows.append((f"ATEN_CPU_CAPABILITY={cap}, 1 thread", run(method, 1, cap)))
        lines.append(f"{method}:")
        lines += [f"  {name:40} {got[0]:8} {got[1]}" for name, got in rows]
        same = rows[0][1][1] == rows[1][1][1]
        caps = {got[1] for name, got in rows if name.startswith("ATEN")}
        lines.append(f"  same run twice: {'same bytes' if same else 'DIFFERENT bytes'}; "
                     f"{len(caps)} distinct results over the 3 capabilities")
        lines.append("")
        print("\n".join(lines), file=sys.stderr, flush=True)
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
